"""The in-cluster schedulers a backend may run instead of the default one (`Backend.scheduler`): the objects we
write for KAI Scheduler and Kueue, built from our pools and quotas (issue 14)."""
