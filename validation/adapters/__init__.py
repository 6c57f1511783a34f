"""The seams validation talks through: one small Protocol per cloud client, with its real adapter.

Checks depend only on the Protocols, so the same checks run against Google Cloud, against the local
platform, and in tests against recorded real-format responses.
"""
