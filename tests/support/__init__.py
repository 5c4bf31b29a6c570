"""What many test modules share and no test module owns: clocks, runners, helpers (issue 30)."""
