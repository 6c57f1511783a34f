"""Vertex AI custom jobs, reached over the service's v1 REST surface."""
