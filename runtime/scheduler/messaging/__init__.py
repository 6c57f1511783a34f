"""Thin adapters around google-cloud-pubsub shared by the scheduler and the local CLI.

``clients`` builds clients (real Pub/Sub or an emulator), ``admin`` creates the contract's topics and
subscriptions, ``publisher`` publishes requests and results as protocol models, ``depth`` measures
backlog and dead-letter depth. Each takes its client as an argument, so tests pass real clients
connected to the local emulator.
"""
