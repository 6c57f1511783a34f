"""Reaching a running platform from outside its images: the control-API client, publishing requests and
collecting results over Pub/Sub, and where a platform runs (a project, or a local platform's state file).

The Python API (``gpurt.client``), validation and the local platform all talk to the runtime through these.
"""
