"""Pricing tables (``<region>.yaml``) that ``components.cost`` reads; data only."""
