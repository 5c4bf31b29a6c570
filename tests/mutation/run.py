"""`make mutate`: cosmic-ray over the modules that decide access, budgets, names, quotas, usage, estimates, audit
and webhooks, each judged by its focused tests (docs/development/mutation.md). Not part of the suite: it takes
hours on 2 cores. Each module's session is kept in .mutation/NAME.sqlite, so a run that was stopped goes on where
it stopped; delete the file to start that module again.

    .venv/bin/python tests/mutation/run.py [NAME ...]     # every module, or the ones named
"""

import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
STATE = ROOT / ".mutation"

# name: (module, its focused tests[, the only functions mutated, where the whole module was too long a run])
MODULES = {
    "audit": ("pools/access/audit.py", "tests/access/test_audit.py"),
    "names": ("pools/engine/kube_names.py", "tests/engine/test_kube_names.py tests/scheduling/test_long_names.py"),
    "user_names": ("pools/engine/user_names.py", "tests/access/test_look_alike_names.py"),
    "estimates": ("scheduling/decisions/estimates.py", "tests/scheduling/test_estimates.py",
                  {"_samples", "typical", "bucket", "_recent_waits", "remaining", "estimate"}),
    "webhooks": ("scheduling/decisions/notifications.py",
                 "tests/scheduling/test_webhook_addresses.py tests/scheduling/test_notification_choices.py",
                 {"check_webhook_url", "public", "host_allowed", "_global", "refused_addresses"}),
    "scoping": ("pools/access/scoping.py",
                "tests/access/test_enforcement.py tests/access/test_hardening.py tests/pages/test_history.py"),
    "visibility": ("pools/models/visibility.py", "tests/access/test_scoping.py tests/access/test_enforcement.py "
                   "tests/access/test_tokens.py tests/access/test_hardening.py tests/access/test_onboarding.py"),
    "quota_limits": ("pools/quotas/limits.py", "tests/scheduling/test_limits.py"),
    "budgets": ("pools/render_limits.py", "tests/scheduling/test_render_budgets.py"),
    "usage_buckets": ("scheduling/usage/buckets.py", "tests/usage/test_buckets.py",
                      {"covered", "hours_of", "capacity_seconds", "hour_floor", "by_hour", "at"}),
}

# One plausible slip per mutant, as a reviewer would make it: an operator swapped for its neighbour (+ for -,
# < for <=, == for !=, | for &), not for every other operator (+ for <<, < for is), which multiplied the mutants by
# three to five, mostly with slips nobody makes.
KEPT_BINARY = "Add_Sub|Sub_Add|Mul_Div|Div_Mul|FloorDiv_Div|Div_FloorDiv|Mod_FloorDiv|BitOr_BitAnd|BitAnd_BitOr"
KEPT_COMPARISON = "Lt_LtE|LtE_Lt|Gt_GtE|GtE_Gt|Eq_NotEq|NotEq_Eq|Is_IsNot|IsNot_Is|In_NotIn|NotIn_In"

CONFIG = """\
[cosmic-ray]
module-path = "{module}"
timeout = 600.0
excluded-modules = []
test-command = "{bin}/python -m pytest -x -q -p no:cacheprovider --reuse-db {tests}"

[cosmic-ray.distributor]
name = "local"

[cosmic-ray.filters.operators-filter]
exclude-operators = [
    "core/ReplaceBinaryOperator_(?!({binary})$)",
    "core/ReplaceComparisonOperator_(?!({comparison})$)",
]
"""


def session(name: str) -> tuple[Path, Path]:
    module, tests = MODULES[name][:2]
    config = STATE / f"{name}.toml"
    config.write_text(CONFIG.format(module=module, tests=tests, bin=BIN, binary=KEPT_BINARY,
                                    comparison=KEPT_COMPARISON))
    return config, STATE / f"{name}.sqlite"


def only(db: Path, functions: set[str]) -> None:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(db), WorkDB.Mode.open) as work_db:
        for item in list(work_db.pending_work_items):
            if not any(mutation.definition_name in functions for mutation in item.mutations):
                work_db.set_result(item.job_id, WorkResult(output="outside the functions chosen",
                                                           worker_outcome=WorkerOutcome.SKIPPED))


def run(name: str) -> None:
    config, db = session(name)
    if not db.exists():
        subprocess.run([BIN / "cosmic-ray", "init", config, db], check=True, cwd=ROOT)
        subprocess.run([BIN / "cr-filter-operators", db, config], check=True, cwd=ROOT)
        if len(MODULES[name]) > 2:
            only(db, MODULES[name][2])
    subprocess.run([BIN / "cosmic-ray", "exec", config, db], check=True, cwd=ROOT)


def summary(name: str) -> str:
    db = STATE / f"{name}.sqlite"
    rows = sqlite3.connect(db).execute(
        "SELECT s.operator_name, s.start_pos_row, s.definition_name, r.worker_outcome, r.test_outcome"
        " FROM mutation_specs s LEFT JOIN work_results r ON r.job_id = s.job_id").fetchall()
    # cosmic-ray keeps its outcomes as enum names: NORMAL, SURVIVED.
    ran = [row for row in rows if (row[3] or "").lower() == "normal"]
    survivors = [row for row in ran if (row[4] or "").lower() == "survived"]
    lines = [f"{name} ({MODULES[name][0]}): {len(ran)} mutants run, {len(ran) - len(survivors)} killed, "
             f"{len(survivors)} survived, {sum(row[3] is None for row in rows)} pending"]
    lines += [f"    line {line} in {where}: {operator}" for operator, line, where, _, _ in sorted(
        survivors, key=lambda row: row[1])]
    return "\n".join(lines)


def main(names: list[str]) -> None:
    unknown = sorted(set(names) - set(MODULES))
    if unknown:
        sys.exit(f"unknown module {', '.join(unknown)}; known: {', '.join(MODULES)}")
    STATE.mkdir(exist_ok=True)
    for name in names or MODULES:
        run(name)
    for name in names or MODULES:
        print(summary(name))


if __name__ == "__main__":
    main(sys.argv[1:])
