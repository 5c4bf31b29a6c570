"""What every door lists and shows of a workload: the bodies and the filter set shared by pages, API, CLI."""
