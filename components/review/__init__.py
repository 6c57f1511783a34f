"""Tooling that reads a rendered stack: it declares no resource, and the Pulumi program never imports it.

The offline plan (``plan``: the program under mocks, recorded and checked against the policies), its diff
against a git revision (``plan_diff``, ``plan_ref``, ``git_worktree``, ``replace_on_change`` with the
providers' ``provider_schema``), the cost and quota estimates (``cost`` with its ``pricing`` tables,
``quotas``), the IAM and CI proofs (``iam_proof``, ``ci_proof``, over the call registry ``cloud_calls`` and
the roles' contents ``iam_permissions``), and the images a stack references and their sizes (``images``,
``image_sizes``). See docs/architecture.md, "The Pulumi program and the tools that read it".
"""
