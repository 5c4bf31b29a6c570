"""Pure decisions (no Django): what the scheduler concludes from facts handed to it."""
