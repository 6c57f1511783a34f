"""The leader lease the gpu-scheduler's replicas elect on, as a record and its stores: shared by the elector, the
local platform's replicas, ``gpurt leader`` and validation, below all of them (docs/architecture.md)."""
