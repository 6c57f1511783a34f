"""Data read from the providers the program uses (see components/replace_on_change.py)."""
