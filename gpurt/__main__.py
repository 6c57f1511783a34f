"""``python -m gpurt``: the same as the ``gpurt`` console script."""

from gpurt.app import main

main()
