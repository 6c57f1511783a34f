"""Post-deploy validation, rollback and state tools, operator drills (docs/validation.md, docs/rollback.md)."""
