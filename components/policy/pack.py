"""The rules of ``components.policy.rules`` as pulumi-policy policies (all mandatory)."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyResourceOptions,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from components.policy import rules
from components.rendered import Resource

PACK_NAME = "gpu-runtime-policies"


def _protected(opts: PolicyResourceOptions | None) -> bool:
    """The resource's ``protect`` option (the engine always sends options; a hand-made resource may not)."""
    return bool(opts is not None and opts.protect)


def _resource_policy(rule: rules.ResourceRule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in rule.check(Resource(args.resource_type, args.name, args.props, _protected(args.opts))):
            report_violation(message, None)

    return ResourceValidationPolicy(
        name=rule.id, description=rule.description, validate=validate, enforcement_level=EnforcementLevel.MANDATORY
    )


def _stack_policy(rule: rules.StackRule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        subjects = [Resource(r.resource_type, r.name, r.props, _protected(r.opts)) for r in args.resources]
        urns = {r.name: r.urn for r in args.resources}
        for resource, message in rule.check(subjects):
            report_violation(f"{resource}: {message}", urns.get(resource))

    return StackValidationPolicy(
        name=rule.id, description=rule.description, validate=validate, enforcement_level=EnforcementLevel.MANDATORY
    )


def build_policies() -> list[ResourceValidationPolicy | StackValidationPolicy]:
    """Every rule of the platform as a mandatory pulumi-policy policy."""
    return [*map(_resource_policy, rules.RESOURCE_RULES), *map(_stack_policy, rules.STACK_RULES)]
