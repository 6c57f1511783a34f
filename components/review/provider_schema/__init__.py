"""Data read from the providers the program uses (see components/review/replace_on_change.py)."""
