"""Operator drills on the local platform (docs/runbooks/README.md), each reporting pass/fail with evidence."""

from typing import Final

# Jobs in the chaos drill's load unless ``--jobs`` says otherwise: enough for rare losses or duplicates to
# show. Kept here, not in ``base``, so the CLI can offer it as a default without importing the drills.
DEFAULT_LOAD_JOBS: Final = 10_000
# How long the chaos drill's long result store outage lasts unless ``--store-outage`` says otherwise (seconds):
# minutes, as managed storage has them, and at real time whatever the emulator's time scale.
DEFAULT_STORE_OUTAGE_S: Final = 300.0
