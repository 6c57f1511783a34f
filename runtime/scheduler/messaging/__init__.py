"""The gpu-scheduler's own Pub/Sub measurements: ``depth`` (backlog and dead-letter depth from Cloud
Monitoring) and ``emulator_depth`` (the same from the local broker). The adapters others share (clients,
topology, publisher) live in ``runtime.pubsub``.
"""
