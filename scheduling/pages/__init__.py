"""The workload pages and their URLs."""
