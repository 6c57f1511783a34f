"""Compare two offline plans (their JSON): resources added, changed (which inputs) and removed, by URN; policy
verdicts; estimated cost. Rendered as Markdown for a pull-request comment, or as JSON.

Pure: two plan documents in (``Plan.to_json()`` of the working tree, and of a git revision), a ``PlanDiff``
out. Cost is priced afresh from each side's node pools with this checkout's pricing table, so a revision
older than the cost estimate still gets one and both sides use the same prices.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from components.rendered import Resource
from components.review.cost import CostEstimate, Range
from components.review.plan import plan_cost
from components.review.replace_on_change import replacing_paths

# A changed resource lists at most this many input paths; a comment must stay readable.
MAX_PATHS: Final = 8
# One comment per pull request: GitHub rejects bodies over 65,536 characters; leave room for both stacks.
MAX_ROWS: Final = 60
# Resource options that change what Pulumi does, compared like inputs.
_OPTIONS: Final = ("protect", "delete_before_replace", "ignore_changes", "provider", "parent")


@dataclass(frozen=True)
class ResourceChange:
    """One resource that differs between the two plans."""

    urn: str
    type: str
    name: str
    paths: tuple[str, ...] = ()
    """Changed inputs (dotted paths; options in parentheses); empty for an added or removed resource."""
    replace: tuple[str, ...] = ()
    """The changed inputs the provider cannot update in place: non-empty means the resource is replaced."""
    protected: bool = False
    """The resource is protected on both sides: Pulumi refuses to replace it. (It allows the replacement when the
    program unprotects the resource in the same update: https://github.com/pulumi/pulumi/pull/8873.)"""


@dataclass(frozen=True)
class RuleChange:
    """One policy rule's verdict on both sides (None: the rule does not exist on that side)."""

    rule: str
    base: bool | None
    head: bool | None
    violations: tuple[str, ...]
    """The working tree's violations."""


@dataclass(frozen=True)
class PoolCostChange:
    """A node pool's billed monthly cost on both sides (None: no such pool there)."""

    pool: str
    base: Range | None
    head: Range | None


@dataclass(frozen=True)
class PlanDiff:
    """What a pull request changes in one stack's plan."""

    stack: str
    ref: str
    base_count: int
    head_count: int
    added: tuple[ResourceChange, ...]
    changed: tuple[ResourceChange, ...]
    removed: tuple[ResourceChange, ...]
    policy: tuple[RuleChange, ...]
    base_cost: CostEstimate | None
    head_cost: CostEstimate | None

    @property
    def pool_costs(self) -> tuple[PoolCostChange, ...]:
        """Billed cost of every pool on either side, by pool name."""
        base = {p.pool: p.billed for p in self.base_cost.pools} if self.base_cost else {}
        head = {p.pool: p.billed for p in self.head_cost.pools} if self.head_cost else {}
        return tuple(PoolCostChange(name, base.get(name), head.get(name)) for name in sorted(base.keys() | head.keys()))

    @property
    def head_ok(self) -> bool:
        """Every rule passes in the working tree."""
        return all(rule.head is not False for rule in self.policy)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready view."""
        def change(c: ResourceChange) -> dict[str, Any]:
            return {"urn": c.urn, "type": c.type, "name": c.name, "inputs": list(c.paths),
                    "replace": list(c.replace), "protected": c.protected}

        def money(r: Range | None) -> dict[str, float] | None:
            return None if r is None else {"low": round(r.low, 2), "high": round(r.high, 2)}

        return {
            "stack": self.stack, "ref": self.ref, "resources": {"base": self.base_count, "head": self.head_count},
            "added": [change(c) for c in self.added], "changed": [change(c) for c in self.changed],
            "removed": [change(c) for c in self.removed],
            "policy": [{"rule": r.rule, "base": r.base, "head": r.head, "violations": list(r.violations)}
                       for r in self.policy],
            "cost": {
                "pools": [{"pool": p.pool, "base": money(p.base), "head": money(p.head)} for p in self.pool_costs],
                "total": {"base": money(self.base_cost.total if self.base_cost else None),
                          "head": money(self.head_cost.total if self.head_cost else None)},
            },
        }


def _leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping) and value:
        for key in sorted(value):
            yield from _leaves(value[key], f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _leaves(item, f"{prefix}[{index}]")
    else:
        yield prefix, value


def changed_paths(base: Mapping[str, Any], head: Mapping[str, Any]) -> tuple[str, ...]:
    """Paths (``a.b[0].c``) of inputs whose values differ, then changed options in parentheses."""
    old, new = dict(_leaves(base.get("inputs") or {})), dict(_leaves(head.get("inputs") or {}))
    paths = [path for path in sorted(old.keys() | new.keys()) if old.get(path) != new.get(path)]
    paths += [f"({option})" for option in _OPTIONS if base.get(option) != head.get(option)]
    return tuple(paths)


def option_replacing(replace_on_changes: Iterable[str], changed: tuple[str, ...]) -> tuple[str, ...]:
    """Which of ``changed`` fall under a resource's own ``replaceOnChanges`` paths (the head program's: Pulumi
    decides with the new options), e.g. the DaskCluster's ``spec.scheduler.metadata``."""
    roots = tuple(replace_on_changes)
    return tuple(path for path in changed
                 if any(path == root or path.startswith((f"{root}.", f"{root}[")) for root in roots))


def _policy(base: Mapping[str, Any], head: Mapping[str, Any]) -> tuple[RuleChange, ...]:
    before = {p["rule"]: bool(p["passed"]) for p in base.get("policy") or []}
    after = {p["rule"]: p for p in head.get("policy") or []}
    return tuple(
        RuleChange(
            rule, before.get(rule), bool(after[rule]["passed"]) if rule in after else None,
            tuple(f"{v['resource']}: {v['message']}" for v in (after[rule]["violations"] if rule in after else ())),
        )
        for rule in [*after, *(r for r in before if r not in after)]
    )


def _cost(document: Mapping[str, Any], region: str) -> CostEstimate | None:
    # Leniently: a revision's plan may predate fields that pricing does not need.
    resources = [Resource(r["type"], str(r.get("name") or ""), r.get("inputs") or {})
                 for r in document.get("resources") or [] if r.get("custom")]
    return plan_cost(resources, region)[0]


def _region(document: Mapping[str, Any]) -> str:
    """The stack's region, from its cluster's location (the plan's JSON carries no config)."""
    for resource in document.get("resources") or []:
        if resource.get("type") == "gcp:container/cluster:Cluster":
            return str((resource.get("inputs") or {}).get("location") or "")
    return ""


def diff_plans(base: Mapping[str, Any], head: Mapping[str, Any], ref: str) -> PlanDiff:
    """What changes from the plan ``base`` (at git revision ``ref``) to the plan ``head`` (the working tree)."""
    old = {r["urn"]: r for r in base.get("resources") or []}
    new = {r["urn"]: r for r in head.get("resources") or []}

    def record(resource: Mapping[str, Any], paths: tuple[str, ...] = (), replace: tuple[str, ...] = (),
               protected: bool = False) -> ResourceChange:
        return ResourceChange(resource["urn"], resource["type"], resource["name"], paths, replace, protected)

    changed = []
    for urn in sorted(old.keys() & new.keys()):
        paths = changed_paths(old[urn], new[urn])
        if paths:
            replace = replacing_paths(new[urn]["type"], old[urn].get("inputs") or {}, new[urn].get("inputs") or {},
                                      paths) + option_replacing(new[urn].get("replace_on_changes") or (), paths)
            changed.append(record(new[urn], paths, replace,
                                  bool(old[urn].get("protect")) and bool(new[urn].get("protect"))))
    return PlanDiff(
        stack=str(head.get("stack") or base.get("stack") or ""),
        ref=ref,
        base_count=len(old),
        head_count=len(new),
        added=tuple(record(new[urn]) for urn in sorted(new.keys() - old.keys())),
        changed=tuple(changed),
        removed=tuple(record(old[urn]) for urn in sorted(old.keys() - new.keys())),
        policy=_policy(base, head),
        base_cost=_cost(base, _region(base) or _region(head)),
        head_cost=_cost(head, _region(head) or _region(base)),
    )


# --- Markdown ----------------------------------------------------------------------------------------


def _usd(r: Range | None) -> str:
    if r is None:
        return "-"
    return f"${r.low:,.0f}" if round(r.low) == round(r.high) else f"${r.low:,.0f} - ${r.high:,.0f}"


def _delta(base: Range | None, head: Range | None) -> str:
    low = (head.low if head else 0.0) - (base.low if base else 0.0)
    high = (head.high if head else 0.0) - (base.high if base else 0.0)
    if round(low) == 0 and round(high) == 0:
        return "0"
    return f"{low:+,.0f} / {high:+,.0f}"


def _verdict(passed: bool | None) -> str:
    return {True: "pass", False: "**FAIL**", None: "-"}[passed]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _how(change: ResourceChange) -> str:
    if not change.replace:
        return "update in place"
    refused = " (protected: Pulumi refuses it, see docs/runbooks/replace-gpu-pool.md)" if change.protected else ""
    return "**replace**" + refused + ": " + ", ".join(f"`{_cell(p)}`" for p in change.replace[:MAX_PATHS])


def _resource_table(title: str, changes: tuple[ResourceChange, ...], with_paths: bool) -> list[str]:
    if not changes:
        return []
    lines = [f"#### {title} ({len(changes)})", "",
             "| type | name |" + (" inputs | how |" if with_paths else ""),
             "| --- | --- |" + (" --- | --- |" if with_paths else "")]
    for change in changes[:MAX_ROWS]:
        row = f"| `{change.type}` | `{_cell(change.name)}` |"
        if with_paths:
            shown = [f"`{_cell(p)}`" for p in change.paths[:MAX_PATHS]]
            more = len(change.paths) - MAX_PATHS
            row += " " + ", ".join(shown) + (f" and {more} more" if more > 0 else "") + f" | {_how(change)} |"
        lines.append(row)
    if len(changes) > MAX_ROWS:
        lines.append(f"| ... | {len(changes) - MAX_ROWS} more (see `gpurt plan --diff --json`) |"
                     + (" | |" if with_paths else ""))
    return [*lines, ""]


def to_markdown(diff: PlanDiff) -> str:
    """The diff as a Markdown section: summary, resources, policy, cost."""
    status = "all policy rules pass" if diff.head_ok else "**policy violations**"
    replaced = sum(1 for change in diff.changed if change.replace)
    lines = [
        f"### `{diff.stack}`: {len(diff.added)} to add, {len(diff.changed) - replaced} to change, "
        f"{replaced} to **replace**, {len(diff.removed)} to remove; {status}",
        "",
        f"Offline plan (`gpurt plan --diff`, no cloud credentials) of the working tree (head) against `{diff.ref}` "
        f"(base): {diff.base_count} -> {diff.head_count} resources.",
        "",
    ]
    if not (diff.added or diff.changed or diff.removed):
        lines += ["No resource changes.", ""]
    lines += _resource_table("Added", diff.added, with_paths=False)
    lines += _resource_table("Changed", diff.changed, with_paths=True)
    lines += _resource_table("Removed", diff.removed, with_paths=False)
    moved = [r for r in diff.policy if r.base != r.head or r.head is False]
    lines += ["#### Policy", ""]
    if moved:
        lines += ["| rule | base | head | violations (head) |", "| --- | --- | --- | --- |"]
        lines += [f"| {r.rule} | {_verdict(r.base)} | {_verdict(r.head)} | {_cell('; '.join(r.violations)) or '-'} |"
                  for r in moved]
    else:
        lines.append(f"All {len(diff.policy)} rules pass on both sides.")
    lines += ["", "#### Estimated monthly cost (USD, minimum nodes .. every pool at its maximum, as billed)", ""]
    if diff.head_cost is None and diff.base_cost is None:
        lines.append("No pricing table for this stack's region.")
    else:
        lines += ["| pool | base | head | change (low / high) |", "| --- | --- | --- | --- |"]
        for pool in diff.pool_costs:
            if pool.base != pool.head:
                cells = (pool.pool, _usd(pool.base), _usd(pool.head), _delta(pool.base, pool.head))
                lines.append("| " + " | ".join(cells) + " |")
        base_total = diff.base_cost.total if diff.base_cost else None
        head_total = diff.head_cost.total if diff.head_cost else None
        lines.append(f"| **total** | {_usd(base_total)} | {_usd(head_total)} | {_delta(base_total, head_total)} |")
        if diff.head_cost:
            low, high = diff.head_cost.spot_discount
            lines += ["", f"List prices of {diff.head_cost.region} recorded {diff.head_cost.recorded}; spot modelled "
                      f"as the documented {low:.0%}-{high:.0%} discount. Pools whose cost is unchanged are omitted."]
    return "\n".join(lines) + "\n"
