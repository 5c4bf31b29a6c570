"""Pure decisions (no Django): admission, the lifecycle of attempts, queue positions, hints,
start estimates."""
