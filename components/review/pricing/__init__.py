"""Pricing tables (``<region>.yaml``) that ``components.review.cost`` reads; data only."""
