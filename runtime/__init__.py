"""What the platform runs: the two runtime images' packages and the code they share.

- ``runtime.scheduler``: the **gpu-scheduler** image (intake, dispatch, leader election, pools, control API).
- ``runtime.worker``: what a Dask worker of the **gpu-worker** image runs (every function handed to Dask).
- ``runtime.manifests``: pure builders of the Kubernetes objects both images and the Pulumi program share.
- ``runtime.protocol``: the wire format (requests, results, strict JSON) and the platform contract.
- ``runtime.access``: how anything outside the images reaches a running platform (control API, topics).
- ``runtime.local``: the same runtime composed on one machine (broker, processes, monitoring, demo report).

Which image copies which is in docs/architecture.md.
"""
