"""Operator drills on the local platform (seed 002's drill checklist), each reporting pass/fail with evidence."""
