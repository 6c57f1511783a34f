"""Service-account roles against the contract's table: a missing role fails, an extra one is reported."""

from __future__ import annotations

from components import contract
from validation.clients.iam import ProjectIam
from validation.runner import Check, CheckFailed


def service_account_roles(iam: ProjectIam, project: str) -> Check:
    """Each service account of the contract holds exactly its roles on the project."""

    def run() -> str:
        bindings = iam.role_bindings()
        missing, extra, held = [], [], []
        for account in contract.SERVICE_ACCOUNTS:
            member = f"serviceAccount:{account.email(project)}"
            roles = {role for role, members in bindings.items() if member in members}
            missing += [f"{account.account_id} lacks {r}" for r in account.roles if r not in roles]
            extra += [f"{account.account_id} also has {r}" for r in sorted(roles - set(account.roles))]
            held.append(f"{account.account_id}: {len(roles & set(account.roles))}/{len(account.roles)}")
        note = f"; extra (least privilege: review): {', '.join(extra)}" if extra else ""
        if missing:
            raise CheckFailed(f"{'; '.join(missing)}{note}",
                              "grant the missing project roles (the IAM component declares them; run pulumi up)")
        return f"roles match ({', '.join(held)}){note}"

    return Check("iam.service-account-roles", run)
