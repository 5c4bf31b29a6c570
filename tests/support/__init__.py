"""What many test modules share and no test module owns (issue 30): the suite's one of each.

- clock.Clock: the injected clock; syncing: a sync round on it (run_beside, watch_round).
- commands.run: `manage.py` commands in-process; children: the database URL and environment of a child process;
  ports.free_port; browser.sign_in: signing in through the form in Chromium.
- Fixtures, as plugins of the suite (tests/conftest.py's pytest_plugins): workloads (`world`, `researcher_api`,
  `kai`), inventory (`gpu_backend`), fleet (the pages' `fleet`, `alpha_member`), fleet_with_history (the browser
  tests' `fleet_with_history`), clients (`admin_client`).

Waiting for another thread or process: tests/waiting.until."""
