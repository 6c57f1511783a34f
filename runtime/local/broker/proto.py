"""The raw protobuf classes of ``google.pubsub.v1`` that the emulator speaks on the wire.

google-cloud-pubsub ships proto-plus wrappers and client stubs but no servicer base classes, so the
server registers generic gRPC handlers and (de)serialises with the underlying protobuf classes, which
are faster than the proto-plus wrappers and are what the wire format is defined by.
"""

from __future__ import annotations

from google.protobuf import duration_pb2, empty_pb2, timestamp_pb2
from google.pubsub_v1.types import pubsub as _types

Empty = empty_pb2.Empty
Timestamp = timestamp_pb2.Timestamp
Duration = duration_pb2.Duration

Topic = _types.Topic.pb()
PubsubMessage = _types.PubsubMessage.pb()
Subscription = _types.Subscription.pb()
DeadLetterPolicy = _types.DeadLetterPolicy.pb()
RetryPolicy = _types.RetryPolicy.pb()
ReceivedMessage = _types.ReceivedMessage.pb()

GetTopicRequest = _types.GetTopicRequest.pb()
UpdateTopicRequest = _types.UpdateTopicRequest.pb()
DeleteTopicRequest = _types.DeleteTopicRequest.pb()
ListTopicsRequest = _types.ListTopicsRequest.pb()
ListTopicsResponse = _types.ListTopicsResponse.pb()
ListTopicSubscriptionsRequest = _types.ListTopicSubscriptionsRequest.pb()
ListTopicSubscriptionsResponse = _types.ListTopicSubscriptionsResponse.pb()
PublishRequest = _types.PublishRequest.pb()
PublishResponse = _types.PublishResponse.pb()
DetachSubscriptionRequest = _types.DetachSubscriptionRequest.pb()
DetachSubscriptionResponse = _types.DetachSubscriptionResponse.pb()

GetSubscriptionRequest = _types.GetSubscriptionRequest.pb()
UpdateSubscriptionRequest = _types.UpdateSubscriptionRequest.pb()
DeleteSubscriptionRequest = _types.DeleteSubscriptionRequest.pb()
ListSubscriptionsRequest = _types.ListSubscriptionsRequest.pb()
ListSubscriptionsResponse = _types.ListSubscriptionsResponse.pb()
PullRequest = _types.PullRequest.pb()
PullResponse = _types.PullResponse.pb()
AcknowledgeRequest = _types.AcknowledgeRequest.pb()
ModifyAckDeadlineRequest = _types.ModifyAckDeadlineRequest.pb()
StreamingPullRequest = _types.StreamingPullRequest.pb()
StreamingPullResponse = _types.StreamingPullResponse.pb()
SeekRequest = _types.SeekRequest.pb()
Snapshot = _types.Snapshot.pb()
CreateSnapshotRequest = _types.CreateSnapshotRequest.pb()
GetSnapshotRequest = _types.GetSnapshotRequest.pb()
UpdateSnapshotRequest = _types.UpdateSnapshotRequest.pb()
DeleteSnapshotRequest = _types.DeleteSnapshotRequest.pb()
ListSnapshotsRequest = _types.ListSnapshotsRequest.pb()
ListSnapshotsResponse = _types.ListSnapshotsResponse.pb()
SeekResponse = _types.SeekResponse.pb()

PUBLISHER_SERVICE = "google.pubsub.v1.Publisher"
SUBSCRIBER_SERVICE = "google.pubsub.v1.Subscriber"
