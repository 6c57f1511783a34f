"""The ``gpurt`` command line: one entry point for everything a person runs."""
