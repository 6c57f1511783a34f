"""Pulumi state tools: backup, restore a checkpoint, repair an interrupted update. Every write backs up first."""
