"""The gpu-scheduler: Pub/Sub job requests in, Dask (or Vertex AI) work, results and artifacts out.

Run it with ``python -m runtime.scheduler``; settings come from the environment (``settings.py``).
"""
