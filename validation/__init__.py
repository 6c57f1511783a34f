"""Post-deploy validation, rollback and state tools, operator drills (DESIGN.md sections 9 and 10)."""
