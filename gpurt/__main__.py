"""``python -m gpurt``: the same as the ``gpurt`` console script."""

from gpurt.cli.app import main

main()
