"""Quotas and fair share: pure computations over departments, projects and pools (no Django)."""
