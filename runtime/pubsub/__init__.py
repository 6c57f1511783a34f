"""Thin adapters around google-cloud-pubsub, shared by the gpu-scheduler, the access layer, validation and
the local platform.

``clients`` builds clients (real Pub/Sub or an emulator, with the local broker's bearer token: ``bearer``),
``admin`` creates the contract's topics and subscriptions, ``publisher`` publishes requests and results as
protocol models. Each takes its client as an argument, so tests pass real clients connected to the local
emulator. The gpu-scheduler's own backlog measurement stays in ``runtime.scheduler.messaging``.
"""
