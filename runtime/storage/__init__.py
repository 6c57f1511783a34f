"""Where results and artifacts live: ``filesystems`` opens the result store's fsspec URL (a folder locally,
``gs://`` in the cloud, the GCS emulator when ``STORAGE_EMULATOR_HOST`` is set).

Shared by the gpu-scheduler's result store (``runtime.scheduler.store``), the Vertex AI backend, the Python
API's artifact reads and validation's checkpoints, so none of them reaches into the scheduler for it.
"""
