"""Service-account roles against the contract: the project table and the resource-scoped grants.

A missing role fails. On the project, a storage or Pub/Sub role of a platform account fails (objects are
granted on the result bucket only; Pub/Sub roles on the topic or subscription they serve, since a publisher on
the project may publish to the dead-letter topic) and any other extra role is reported. The result bucket's own
policy and the policies of the service accounts others act as are read too, where the project policy never
shows them: each scoped grant must be there, and a platform account holding any other role there fails, since
that grant is wider than anything the code calls. Which scoped grants a stack has depends on whether it routes
jobs to Vertex AI.
"""

from __future__ import annotations

from runtime.protocol import contract
from validation.adapters.iam import ProjectIam, ResourceIam
from validation.runner import Check, CheckFailed

# Roles a platform account must never hold on the project, and where they belong instead: a storage role there
# reaches every bucket, a Pub/Sub role every topic and subscription (the dead-letter topic included).
_NEVER_ON_PROJECT = {"roles/storage.": "the result bucket", "roles/pubsub.": "its topic or subscription"}


def _belongs(role: str) -> str | None:
    """Where ``role`` must be bound instead of the project, or None if it may be bound there."""
    return next((where for prefix, where in _NEVER_ON_PROJECT.items() if role.startswith(prefix)), None)


def _project_roles(account: contract.ServiceAccountSpec, vertex: bool) -> set[str]:
    scoped = {g.role for g in contract.scoped_grants(vertex)
              if g.account_id == account.account_id and g.scope is contract.GrantScope.PROJECT}
    return set(account.roles) | scoped


def _scoped(resources: ResourceIam, project: str, vertex: bool) -> tuple[list[str], list[str], int]:
    """Scoped grants absent from their resource's policy, platform grants there beyond them, and how many
    grants were checked."""
    members = {f"serviceAccount:{spec.email(project)}": spec.account_id for spec in contract.SERVICE_ACCOUNTS}
    emails = {spec.account_id: spec.email(project) for spec in contract.SERVICE_ACCOUNTS}
    bucket = contract.result_bucket(project)
    expected = contract.scoped_grants(vertex)
    # Every resource any stack binds a scoped grant on is read, so a Vertex-only grant left behind shows.
    policies = {
        (contract.GrantScope.RESULT_BUCKET, ""): (f"bucket {bucket}", lambda: resources.bucket_bindings(bucket)),
    }
    for grant in contract.SCOPED_GRANTS:
        if grant.scope is contract.GrantScope.SERVICE_ACCOUNT:
            policies[(grant.scope, grant.target)] = (
                f"service account {grant.target}",
                lambda email=emails[grant.target]: resources.service_account_bindings(email))
    missing, wider, checked = [], [], 0
    for (scope, target), (where, read) in policies.items():
        bindings = read()
        wanted = {(emails[g.account_id], g.role) for g in expected if (g.scope, g.target) == (scope, target)}
        for grant in (g for g in expected if (g.scope, g.target) == (scope, target)):
            checked += 1
            if f"serviceAccount:{emails[grant.account_id]}" not in bindings.get(grant.role, set()):
                missing.append(f"{grant.account_id} lacks {grant.role} on {where} ({grant.reason})")
        wider += [f"{members[member]} also holds {role} on {where}, which the contract does not grant"
                  for role, held in sorted(bindings.items()) for member in sorted(held)
                  if member in members and (emails[members[member]], role) not in wanted]
    return missing, wider, checked


def service_account_roles(
    iam: ProjectIam, project: str, resources: ResourceIam | None = None, vertex: bool = False
) -> Check:
    """Each service account holds its project roles and, given ``resources``, its resource-scoped grants.

    ``vertex``: the stack routes jobs to Vertex AI, so the contract's Vertex-only grants are expected; without
    it they count as extra.
    """

    def run() -> str:
        bindings = iam.role_bindings()
        missing, extra, held = [], [], []
        for account in contract.SERVICE_ACCOUNTS:
            expected = _project_roles(account, vertex)
            member = f"serviceAccount:{account.email(project)}"
            roles = {role for role, members in bindings.items() if member in members}
            missing += [f"{account.account_id} lacks {r}" for r in sorted(expected - roles)]
            missing += [f"{account.account_id} holds {r} on the whole project: grant it on {_belongs(r)} only"
                        for r in sorted(roles - expected) if _belongs(r)]
            extra += [f"{account.account_id} also has {r}" for r in sorted(roles - expected) if not _belongs(r)]
            held.append(f"{account.account_id}: {len(roles & expected)}/{len(expected)}")
        scoped = ""
        if resources is not None:
            scoped_missing, wider, checked = _scoped(resources, project, vertex)
            missing += scoped_missing + wider
            scoped = f"; scoped grants: {checked - len(scoped_missing)}/{checked}"
        note = f"; extra (least privilege: review): {', '.join(extra)}" if extra else ""
        if missing:
            raise CheckFailed(f"{'; '.join(missing)}{note}",
                              "make the grants the contract's (the IAM component declares them; run pulumi up)")
        return f"roles match ({', '.join(held)}){scoped}{note}"

    return Check("iam.service-account-roles", run)
