"""The leader lease the gpu-scheduler's replicas elect on: the record and its stores (in memory, a file, the
Kubernetes API) and the elector that acquires and renews it. Shared by the gpu-scheduler, the local platform's
replicas, ``gpurt leader`` and validation (the leader drill runs the elector), below all of them
(docs/architecture.md)."""
