"""Vertex AI custom jobs over REST: the adapter the gpu-scheduler's Vertex AI backend and validation's Vertex AI
check share, below both (docs/architecture.md)."""
