"""A TCP port for a server a test starts, or for a connection a test wants refused."""

import random
import socket

# Below Linux's ephemeral range (32768-60999 by default), which the kernel hands out to every bind(("", 0)) and every
# outgoing connection of every process on the machine: a port taken from there and released is soon handed to
# someone else (a loaded run saw `make demo`'s site, started 55 s after its port was chosen, find it taken by another
# suite's server). Here only another caller of this function can pick the same port, at random, among 12,000.
RANGE = range(20000, 32000)
_choose = random.SystemRandom()  # not the `random` module's state, which tests and libraries seed alike


def free_port() -> int:
    """A port nothing listens on now, outside the ports the kernel hands out by itself."""
    for _ in range(200):
        port = _choose.choice(RANGE)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {RANGE.start}-{RANGE.stop - 1} after 200 tries")
