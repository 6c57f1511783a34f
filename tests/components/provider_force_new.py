"""Read the ForceNew attributes of google_container_node_pool out of terraform-provider-google's Go source.

pulumi-gcp bridges that provider, so its ForceNew attributes are the node-pool inputs whose change makes
Pulumi replace the pool. The schema is Go map literals: ``"name": {`` opens an attribute, ``ForceNew: true``
directly inside it marks it, and ``"name": schemaX(),`` splices in the schema a helper function returns.
Used by the test that keeps ``components/review/provider_schema/force_new.json`` equal to the provider.
"""

from __future__ import annotations

import re

_FUNCTION = re.compile(r"func (schema[A-Z]\w*)\(\) \*schema\.Schema \{")
_TOKENS = re.compile(r'"([a-z0-9_]+)":\s*\{|"([a-z0-9_]+)":\s*(schema[A-Z]\w*)\(\),|ForceNew:\s*true|\{|\}')


def _block(src: str, open_brace: int) -> str:
    """The text between the brace at ``open_brace`` and its match."""
    depth, end = 0, open_brace
    while True:
        depth += src[end] == "{"
        depth -= src[end] == "}"
        end += 1
        if depth == 0:
            return src[open_brace + 1:end - 1]


def functions(src: str) -> dict[str, str]:
    """Bodies of the ``func schemaX() *schema.Schema`` helpers in ``src``."""
    return {m.group(1): _block(src, m.end() - 1) for m in _FUNCTION.finditer(src)}


def _walk(body: str, prefix: list[str], helpers: dict[str, str], out: set[str]) -> None:
    named: list[tuple[str, int]] = []  # open attributes and the brace depth each opened at
    depth = 0
    for match in _TOKENS.finditer(body):
        token = match.group(0)
        if match.group(1):
            depth += 1
            named.append((match.group(1), depth))
        elif match.group(2):
            _helper(helpers[match.group(3)], [*prefix, *(n for n, _ in named), match.group(2)], helpers, out)
        elif token.startswith("ForceNew"):
            if named and named[-1][1] == depth:  # directly inside the attribute, not a nested one
                out.add(".".join([*prefix, *(n for n, _ in named)]))
        elif token == "{":
            depth += 1
        else:
            if named and named[-1][1] == depth:
                named.pop()
            depth -= 1


def _helper(body: str, prefix: list[str], helpers: dict[str, str], out: set[str]) -> None:
    returned = body[re.search(r"return &schema\.Schema\{", body).end():]  # type: ignore[union-attr]
    depth = 0
    for match in re.finditer(r"ForceNew:\s*true|\{|\}", returned):
        token = match.group(0)
        depth += token == "{"
        depth -= token == "}"
        if token.startswith("ForceNew") and depth == 0:
            out.add(".".join(prefix))
    _walk(returned, prefix, helpers, out)


def extract(node_pool_go: str, node_config_go: str) -> list[str]:
    """ForceNew attribute paths (snake_case, dotted) of google_container_node_pool."""
    helpers = {**functions(node_config_go), **functions(node_pool_go)}
    out: set[str] = set()
    # The shared node-pool schema, then the resource's own keys merged into it (project, cluster, location).
    for marker in ("var schemaNodePool = map[string]*schema.Schema", "tpgresource.MergeSchemas("):
        start = node_pool_go.index("map[string]*schema.Schema", node_pool_go.index(marker))
        _walk(_block(node_pool_go, node_pool_go.index("{", start)), [], helpers, out)
    return sorted(out)
