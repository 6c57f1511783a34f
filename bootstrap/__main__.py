"""The bootstrap program: everything a stack of the main program needs before its first deploy.

Project, region and image repository come from the main program's stack file of the same name
(``../Pulumi.<stack>.yaml``), so the two programs cannot disagree about them.
"""

from pathlib import Path

import pulumi

from components.bootstrap import Bootstrap, BootstrapArgs, main_stack_target
from components.lifecycle import lifecycle_options

stack = pulumi.get_stack()
config = pulumi.Config()
target = main_stack_target(stack, Path(__file__).resolve().parent.parent)
# The registry holds every image a rollback may need: protected like the main stack's state.
pulumi.runtime.register_stack_transformation(lifecycle_options(protect_state=True))
bootstrap = Bootstrap(
    "bootstrap",
    BootstrapArgs(
        project=target.project,
        region=target.region,
        repository=target.repository,
        github_repository=config.require("githubRepository"),
        github_repository_id=config.require("githubRepositoryId"),
        github_owner_id=config.require("githubOwnerId"),
        deploy_environment=stack,
    ),
)

pulumi.export("registry_url", bootstrap.registry_url)
pulumi.export("workload_identity_provider", bootstrap.provider.name)
pulumi.export("deploy_service_account", bootstrap.deploy_account.email)
pulumi.export("preview_service_account", bootstrap.preview_account.email)
