"""The running machinery (Django side): the admission cycle and its snapshot, the dispatch outbox, attempts,
following Jobs and pods, stops, periodic sweeps, metrics."""
