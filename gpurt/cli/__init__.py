"""The ``gpurt`` command line: every command a person runs, in one package (``gpurt.cli.app`` assembles them)."""
