"""Service-account roles against the contract: the project table and the resource-scoped grants.

A missing role fails; an extra project role is reported. The scoped grants (a role on the result bucket, on
another service account) are read from those resources' own policies, where the project policy never
shows them.
"""

from __future__ import annotations

from components import contract
from validation.clients.iam import ProjectIam, ResourceIam
from validation.runner import Check, CheckFailed


def _project_roles(account: contract.ServiceAccountSpec) -> set[str]:
    scoped = {g.role for g in contract.SCOPED_GRANTS
              if g.account_id == account.account_id and g.scope is contract.GrantScope.PROJECT}
    return set(account.roles) | scoped


def _scoped_missing(resources: ResourceIam, project: str) -> tuple[list[str], int]:
    """Scoped grants absent from their resource's policy, and how many were checked."""
    emails = {spec.account_id: spec.email(project) for spec in contract.SERVICE_ACCOUNTS}
    missing, checked = [], 0
    for grant in contract.SCOPED_GRANTS:
        if grant.scope is contract.GrantScope.RESULT_BUCKET:
            where = f"bucket {contract.result_bucket(project)}"
            bindings = resources.bucket_bindings(contract.result_bucket(project))
        elif grant.scope is contract.GrantScope.SERVICE_ACCOUNT:
            where = f"service account {grant.target}"
            bindings = resources.service_account_bindings(emails[grant.target])
        else:
            continue  # project-scoped: checked with the project policy
        checked += 1
        if f"serviceAccount:{emails[grant.account_id]}" not in bindings.get(grant.role, set()):
            missing.append(f"{grant.account_id} lacks {grant.role} on {where} ({grant.reason})")
    return missing, checked


def service_account_roles(iam: ProjectIam, project: str, resources: ResourceIam | None = None) -> Check:
    """Each service account holds its project roles and, given ``resources``, its resource-scoped grants."""

    def run() -> str:
        bindings = iam.role_bindings()
        missing, extra, held = [], [], []
        for account in contract.SERVICE_ACCOUNTS:
            expected = _project_roles(account)
            member = f"serviceAccount:{account.email(project)}"
            roles = {role for role, members in bindings.items() if member in members}
            missing += [f"{account.account_id} lacks {r}" for r in sorted(expected - roles)]
            extra += [f"{account.account_id} also has {r}" for r in sorted(roles - expected)]
            held.append(f"{account.account_id}: {len(roles & expected)}/{len(expected)}")
        scoped = ""
        if resources is not None:
            scoped_missing, checked = _scoped_missing(resources, project)
            missing += scoped_missing
            scoped = f"; scoped grants: {checked - len(scoped_missing)}/{checked}"
        note = f"; extra (least privilege: review): {', '.join(extra)}" if extra else ""
        if missing:
            raise CheckFailed(f"{'; '.join(missing)}{note}",
                              "grant the missing roles (the IAM component declares them; run pulumi up)")
        return f"roles match ({', '.join(held)}){scoped}{note}"

    return Check("iam.service-account-roles", run)
