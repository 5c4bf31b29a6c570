"""Departments, projects and quotas: documents, the write path, usage and fair share."""
