"""Where OSMO's special tokens point inside a task's pod (pure: no Django): `{{output}}` is the task's output
directory and `{{input:N}}` the directory holding its N-th input's data, the paths OSMO's own pods use (its
documentation: "These containers share volumes (/osmo/data/input and /osmo/data/output)")."""

DATA_DIR = "/osmo/data"
OUTPUT_DIR = f"{DATA_DIR}/output"
INPUT_DIR = f"{DATA_DIR}/input"


def input_dir(n: int) -> str:
    """The directory of the task's `n`-th input (0-based, in the order of its `inputs`)."""
    return f"{INPUT_DIR}/{n}"
