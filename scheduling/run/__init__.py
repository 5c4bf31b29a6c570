"""Django-side running machinery: loaders and loops that feed the pure decisions."""
