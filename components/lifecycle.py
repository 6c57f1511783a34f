"""Resource options every stack needs by resource type: ``protect`` for state, ``delete_before_replace`` for names.

Applied to every resource of the program through one stack transformation, so no component can forget it:

- ``protect`` on what holds state that a replacement or a ``pulumi destroy`` would lose (results, images,
  queued messages, the cluster): Pulumi then refuses to delete them until someone unprotects them on
  purpose. It follows the stack's ``deletionProtection`` (off for throw-away stacks). A component may opt one
  resource out by setting ``protect=False`` itself, saying why (the deploy probe's subscription, whose messages
  are disposable: ``components/pubsub.py``); the transformation leaves an explicit choice alone.
- ``delete_before_replace`` on resources with a fixed physical name: Pulumi replaces create-first by
  default, and the new resource cannot take a name the old one still holds. IAM members too: for an
  unchanged role and member, create-first adds a binding that already exists, then the old member's
  delete removes it, leaving none.

Kubernetes objects need neither: the Kubernetes provider deletes first whenever a name is given.
"""

from __future__ import annotations

from typing import Final

import pulumi

STATEFUL_TYPES: Final = frozenset({
    "gcp:storage/bucket:Bucket",
    "gcp:artifactregistry/repository:Repository",
    "gcp:container/cluster:Cluster",
    "gcp:pubsub/topic:Topic",
    "gcp:pubsub/subscription:Subscription",
    # Deleting a CustomResourceDefinition deletes every object of its kind: the DaskCluster and its workers.
    "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
})
FIXED_NAME_TYPES: Final = STATEFUL_TYPES | frozenset({
    "gcp:serviceaccount/account:Account",
    "gcp:container/nodePool:NodePool",
    "gcp:compute/network:Network",
    "gcp:compute/subnetwork:Subnetwork",
    "gcp:compute/router:Router",
    "gcp:compute/routerNat:RouterNat",
    "gcp:projects/iAMMember:IAMMember",
    "gcp:serviceaccount/iAMMember:IAMMember",
    "gcp:storage/bucketIAMMember:BucketIAMMember",
    "gcp:pubsub/topicIAMMember:TopicIAMMember",
    "gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember",
})


def lifecycle_options(protect_state: bool) -> pulumi.ResourceTransformation:
    """The stack transformation setting ``protect`` and ``delete_before_replace`` by resource type."""

    def transform(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        extra = pulumi.ResourceOptions(
            protect=True if protect_state and args.type_ in STATEFUL_TYPES and args.opts.protect is None else None,
            delete_before_replace=True if args.type_ in FIXED_NAME_TYPES else None,
        )
        if extra.protect is None and extra.delete_before_replace is None:
            return None
        return pulumi.ResourceTransformationResult(args.props, pulumi.ResourceOptions.merge(args.opts, extra))

    return transform
