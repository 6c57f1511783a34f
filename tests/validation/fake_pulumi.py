"""The body of the stand-in ``pulumi`` executable that ``RecordingPulumiCli`` installs (tests only).

It answers from a state folder (history, exports, outputs, the stacks that exist) and enforces the rules of
the real CLI that this project relies on, each with the place in ``pulumi/pulumi`` that enforces it:

- a stack name is resolved as Pulumi Cloud resolves it: ``org/project/stack`` as written, ``org/stack`` in the
  current project, a bare ``stack`` in the caller's *default organization* (not the one a stack was created
  in), and a stack that does not exist under that name is refused;
- stack configuration lives in ``Pulumi.<stack>.yaml`` beside ``Pulumi.yaml``; ``config set-all`` stores
  ``--plaintext``/``--secret`` values as strings and ``--json`` values with their structure (``objectValue``);
- ``up`` and ``preview`` check every key ``Pulumi.yaml`` types against the stack's value, require a secret key
  to be encrypted and a key without default to be set, and refuse the stack before anything runs otherwise;
- ``stack history --json`` shows each recorded config value as ``{value, secret, objectValue}``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

# pkg/backend/backenderr/backenderr.go: StackNotFoundError's message.
_NOT_FOUND = "no stack named '{}' found"


class CliError(Exception):
    """A refusal: printed as ``error: ...`` on stderr with exit status 255, as the CLI does."""


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def _flags(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == name]


def _project_name() -> str | None:
    path = Path("Pulumi.yaml")
    return str(yaml.safe_load(path.read_text())["name"]) if path.exists() else None


def resolve_stack(name: str, default_org: str) -> str:
    """The fully qualified name the CLI makes of ``name``.

    pkg/backend/httpstate/backend.go ``parseStackName`` / ``ParseStackReference``: one, two or three
    ``/``-separated parts; a missing owner is the default organization (``pulumi org get-default``, else the
    user), a missing project is the current ``Pulumi.yaml``'s name.
    """
    parts = name.split("/")
    if len(parts) > 3:
        raise CliError(f"could not parse stack name '{name}'")
    owner = parts[0] if len(parts) > 1 else default_org
    project = parts[1] if len(parts) == 3 else None
    stack = parts[-1]
    project = project or _project_name()
    if not project:
        raise CliError("no Pulumi.yaml project file found; either run this command from a directory containing a "
                       "Pulumi project, or pass the fully qualified stack name (org/project/stack)")
    return f"{owner}/{project}/{stack}"


class FakePulumi:
    """One invocation of the stand-in over the state folder ``state``."""

    def __init__(self, state: Path, argv: list[str]) -> None:
        self.state = state
        # automation puts global flags first (--non-interactive); the command words follow
        self.argv = [a for a in argv if a != "--non-interactive"]

    def load(self, name: str) -> Any:
        """A JSON file of the state folder."""
        return json.loads((self.state / name).read_text())

    def save(self, name: str, value: Any) -> None:
        """Write a JSON file of the state folder."""
        (self.state / name).write_text(json.dumps(value, indent=2))

    def record(self, call: dict[str, Any]) -> None:
        """Append the invocation to ``calls.jsonl``."""
        with (self.state / "calls.jsonl").open("a") as f:
            f.write(json.dumps(call) + "\n")

    # -- stacks -------------------------------------------------------------------------------------------

    def stack(self) -> str:
        """The ``--stack`` the command names, fully qualified; it must exist."""
        name = _flag(self.argv, "--stack") or self.selected()
        qualified = resolve_stack(name, self.load("cli.json")["default_org"])
        if qualified not in self.load("stacks.json"):
            raise CliError(_NOT_FOUND.format(name))
        return qualified

    def selected(self) -> str:
        """The stack ``stack select`` chose last; a command without ``--stack`` needs one."""
        if not (self.state / "selected.json").exists():
            raise CliError("no stack selected; please use `pulumi stack select` to choose one")
        return str(self.load("selected.json"))

    def select(self) -> None:
        """``stack select [--create] [--stack] NAME``."""
        words = [a for a in self.argv[2:] if not a.startswith("--")]
        name = _flag(self.argv, "--stack") or words[0]
        qualified = resolve_stack(name, self.load("cli.json")["default_org"])
        stacks = self.load("stacks.json")
        if qualified not in stacks:
            if "--create" not in self.argv:
                raise CliError(_NOT_FOUND.format(name))
            self.save("stacks.json", [*stacks, qualified])
        self.save("selected.json", qualified)

    def list_stacks(self) -> list[dict[str, Any]]:
        """``stack ls --json [--organization ORG] [--project NAME]``: pkg/cmd/pulumi/stack/stack_list.go; without
        ``--organization`` every organization's stacks of the current project are listed."""
        org, project = _flag(self.argv, "--organization"), _flag(self.argv, "--project") or _project_name()
        return [{"name": name} for name in self.load("stacks.json")
                if name.split("/")[1] == project and org in (None, name.split("/")[0])]

    # -- config -------------------------------------------------------------------------------------------

    def stack_file(self, qualified: str) -> Path:
        """``Pulumi.<stack>.yaml`` beside ``Pulumi.yaml``: named after the stack's own name, not its owner."""
        return Path(f"Pulumi.{qualified.rsplit('/', 1)[-1]}.yaml")

    def read_config(self, qualified: str) -> dict[str, Any]:
        """The stack file's ``config:`` as written."""
        path = self.stack_file(qualified)
        return dict((yaml.safe_load(path.read_text()) or {}).get("config") or {}) if path.exists() else {}

    def write_config(self, qualified: str, config: dict[str, Any]) -> None:
        """Replace the stack file's ``config:``, keeping its other settings."""
        path = self.stack_file(qualified)
        settings = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
        settings["config"] = config
        path.write_text(yaml.safe_dump(settings, sort_keys=False))

    def config_key(self, key: str) -> str:
        """pkg/cmd/pulumi/config/config.go ``ParseConfigKey``: a key without a namespace is the project's."""
        return key if ":" in key else f"{_project_name()}:{key}"

    def show_config(self) -> dict[str, Any]:
        """``config --json``: each key as ``{value, secret, objectValue}``, a secret's value only with
        ``--show-secrets`` (pkg/cmd/pulumi/config/config.go ``listConfig``)."""
        shown = {}
        for key, value in self.read_config(self.stack()).items():
            entry = history_entry(value)
            if entry["secret"] and "--show-secrets" not in self.argv:
                entry.pop("value")
            shown[key] = entry
        return shown

    def set_one(self, stdin: str) -> None:
        """``config set [--secret] [--path] KEY [VALUE]``, the value from stdin when not given."""
        qualified = self.stack()
        words = [a for i, a in enumerate(self.argv[2:], 2)
                 if not a.startswith("--") and self.argv[i - 1] != "--stack"]
        key, value = self.config_key(words[0]), words[1] if len(words) > 1 else stdin
        stored: Any = _encrypt(value) if "--secret" in self.argv else value
        config = self.read_config(qualified)
        if "--path" in self.argv and "." in key:
            # config.Map.Set with path: one field of an object value (the only path form the project uses)
            top, _, field = key.partition(".")
            config[top] = {**(config.get(top) or {}), field: stored}
        else:
            config[key] = stored
        self.write_config(qualified, config)

    def set_all(self) -> None:
        """``config set-all``: pkg/cmd/pulumi/config/config.go ``newConfigSetAllCmd``."""
        qualified = self.stack()
        config = self.read_config(qualified)
        document = _flag(self.argv, "--json")
        pairs = [(a, False) for a in _flags(self.argv, "--plaintext")]
        pairs += [(a, True) for a in _flags(self.argv, "--secret")]
        if document is not None and (pairs or "--path" in self.argv):
            raise CliError("the --json option cannot be used with the --plaintext, --secret or --path options")
        if "--path" in self.argv:
            raise CliError("the stand-in does not implement --path")  # nothing in the project uses it with set-all
        for pair, secret in pairs:
            # --plaintext/--secret values are strings (config.NewValue / NewSecureValue), whatever they look like
            key, _, value = pair.partition("=")
            key = self.config_key(key)
            config[key] = _encrypt(value) if secret else value
        for given, entry in json.loads(document or "{}").items():
            key = self.config_key(given)
            if entry.get("value") is None:
                raise CliError(f"value for --json object key {key!r} is nil")
            if "objectValue" in entry:
                # config.NewObjectValue: the structure is kept (a secret object is not used by this project)
                if entry.get("secret"):
                    raise CliError("the stand-in does not implement secret objects")
                config[key] = json.loads(entry["value"])
            else:
                config[key] = _encrypt(entry["value"]) if entry.get("secret") else entry["value"]
        self.write_config(qualified, config)

    def validate_config(self, qualified: str) -> dict[str, Any]:
        """The stack's config checked against ``Pulumi.yaml`` as ``pulumi up``/``preview`` check it.

        pkg/workspace/config.go ``ValidateStackConfigAndApplyProjectConfig`` (a project key with neither a
        stack value nor a default is missing) and ``validateStackConfigValue`` (a ``secret: true`` key must be
        encrypted; an object value is parsed from its JSON, anything else is a string, then
        sdk/go/common/workspace/project.go ``ValidateConfigValue`` decides).
        """
        project = yaml.safe_load(Path("Pulumi.yaml").read_text())
        config = self.read_config(qualified)
        stack_name = qualified.rsplit("/", 1)[-1]
        declared = {short: spec if isinstance(spec, dict) else {"default": spec}
                    for short, spec in (project.get("config") or {}).items()}
        keys = {short: short if ":" in short else f"{project['name']}:{short}" for short in declared}
        # first the keys with neither a value nor a default (only the project's own namespace), then the values
        missing = sorted(short for short, spec in declared.items() if keys[short] not in config
                         and "default" not in spec and keys[short].startswith(f"{project['name']}:"))
        if missing:
            values = "value" if len(missing) == 1 else "values"
            names = (f"'{missing[0]}'" if len(missing) == 1
                     else " ".join(f"'{k}'," for k in missing[:-2]) + f" '{missing[-2]}' and '{missing[-1]}'")
            raise CliError(f"Stack '{stack_name}' is missing configuration {values} {names.strip()}")
        for short, spec in sorted(declared.items()):
            if keys[short] not in config:
                continue
            value = config[keys[short]]
            if spec.get("secret") and not _is_secure(value):
                raise CliError(
                    f"Stack '{stack_name}' with configuration key '{short}' must be encrypted as it's secret")
            if "type" in spec:
                content = _decrypt(value) if _is_secure(value) else _as_config_content(value)
                if not validate_config_value(spec["type"], spec.get("items"), content):
                    raise CliError(f"Stack '{stack_name}' with configuration key '{short}' must be of type "
                                   f"'{_full_type_name(spec['type'], spec.get('items'))}'")
        return config

    # -- history ------------------------------------------------------------------------------------------

    def add_history(self, kind: str, config: dict[str, Any]) -> None:
        """Record an update as the CLI does: the program's git commit and the config it ran with."""
        history = self.load("history.json")
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        history.insert(0, {"version": max((e["version"] for e in history), default=0) + 1, "kind": kind,
                           "startTime": now, "message": "", "environment": {"git.head": head} if head else {},
                           "config": {key: history_entry(value) for key, value in config.items()},
                           "result": os.environ.get("RECORDING_PULUMI_RESULT", "succeeded"), "endTime": now})
        self.save("history.json", history)

    # -- dispatch -----------------------------------------------------------------------------------------

    def run(self) -> None:
        """Answer one invocation."""
        argv, call = self.argv, {"argv": self.argv, "cwd": os.getcwd()}
        try:
            if argv[:1] == ["version"]:
                print(self.load("cli.json")["version"])
            elif argv[:2] == ["stack", "select"]:
                self.select()
            elif argv[:2] == ["stack", "history"]:
                self.stack()
                history = self.load("history.json")
                print(json.dumps(history[:1] if _flag(argv, "--page-size") == "1" else history))
            elif argv[:2] == ["stack", "export"]:
                self.stack()
                version = _flag(argv, "--version")
                name = f"export-v{version}.json" if version else "current.json"
                if not (self.state / name).exists():
                    raise CliError(f"no checkpoint for version {version}")
                print(json.dumps(self.load(name)))
            elif argv[:2] == ["stack", "import"]:
                self.stack()
                call["imported"] = json.loads(Path(_flag(argv, "--file") or "").read_text())
                self.save("current.json", call["imported"])
            elif argv[:2] == ["stack", "output"]:
                self.stack()
                print(json.dumps(self.load("outputs.json")))
            elif argv[:2] == ["stack", "ls"]:
                print(json.dumps(self.list_stacks()))
            elif argv[:2] == ["config", "set-all"]:
                self.set_all()
            elif argv[:2] == ["config", "set"]:
                self.set_one(sys.stdin.read() if not sys.stdin.isatty() else "")
            elif argv[:1] == ["config"] and "--json" in argv:
                print(json.dumps(self.show_config()))
            elif argv[:1] in (["up"], ["preview"]):
                qualified = self.stack()
                call["config"] = config = self.validate_config(qualified)
                print(f"{argv[0].capitalize()} of stack {qualified}: done")
                if argv[0] == "up":
                    self.add_history("update", config)
                    if os.environ.get("RECORDING_PULUMI_RESULT", "succeeded") != "succeeded":
                        raise CliError("update failed")
            elif argv[:1] == ["refresh"]:
                qualified = self.stack()
                print(f"Refresh of stack {qualified}: done")
                self.add_history("refresh", self.read_config(qualified))
        except CliError as exc:
            call["error"] = str(exc)
            self.record(call)
            sys.stderr.write(f"error: {exc}\n")
            sys.exit(255)
        self.record(call)


def _encrypt(plaintext: str) -> dict[str, str]:
    """A ``secure:`` value (the stand-in's cipher is base64; what matters is that it is marked secure)."""
    return {"secure": "v1:" + base64.b64encode(plaintext.encode()).decode()}


def _is_secure(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"}


def _decrypt(value: dict[str, str]) -> str:
    return base64.b64decode(value["secure"].removeprefix("v1:")).decode()


def _as_config_content(value: Any) -> Any:
    """What ``validateStackConfigValue`` checks: an object value's structure, any other value as a string.

    sdk/go/common/resource/config/value.go: a YAML scalar (``false``, ``2``) is read as its text; a mapping or
    a sequence is an object value.
    """
    if isinstance(value, dict | list):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def history_entry(value: Any) -> dict[str, Any]:
    """A stack-file value as ``stack history --json --show-secrets`` shows it.

    pkg/cmd/pulumi/stack/stack_history.go ``buildUpdatesJSON``: ``value`` is the text (an object's JSON), with
    ``objectValue`` the parsed structure for an object value.
    """
    if _is_secure(value):
        return {"value": _decrypt(value), "secret": True}
    content = _as_config_content(value)
    if isinstance(content, str):
        return {"value": content, "secret": False}
    return {"value": json.dumps(content), "objectValue": content, "secret": False}


def validate_config_value(type_name: str, items: dict[str, Any] | None, value: Any) -> bool:
    """sdk/go/common/workspace/project.go ``ValidateConfigValue``, rule for rule."""
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "integer":
        if isinstance(value, bool):
            return False
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return True
        # strconv.Atoi: an optional sign and decimal digits
        return isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value) is not None
    if type_name == "boolean":
        return value in ("true", "false") or isinstance(value, bool)
    if type_name == "object":
        return isinstance(value, dict)
    if not isinstance(value, list) or items is None:
        return False
    return all(validate_config_value(items["type"], items.get("items"), item) for item in value)


def _full_type_name(type_name: str, items: dict[str, Any] | None) -> str:
    """sdk/go/common/workspace/project.go ``InferFullTypeName``: ``array<string>``."""
    return f"array<{_full_type_name(items['type'], items.get('items'))}>" if items is not None else type_name


def main(state: str) -> None:
    """Entry point of the stand-in executable."""
    FakePulumi(Path(state), sys.argv[1:]).run()
