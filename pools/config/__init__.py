"""Configuration: documents and their rules, the effective view, the registry of kinds, the one write path
and its history, and the shipped defaults."""
