"""Rollback: redeploy the last good program and config, or undo the scheduler's Kubernetes rollout."""
