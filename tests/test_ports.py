"""tests.support.ports: the ports handed to test servers are ones the kernel never hands out by itself, so nothing
else on a busy machine takes one between its choice and the server's bind."""

import socket
from pathlib import Path

from tests.support.ports import free_port


def ephemeral() -> range:
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


def test_a_free_port_is_outside_the_kernel_s_ephemeral_range_and_can_be_bound():
    kernels = ephemeral()
    ports = {free_port() for _ in range(300)}
    assert not [port for port in ports if port in kernels]
    assert len(ports) > 250  # chosen at random, not one port again and again
    with socket.socket() as server:
        server.bind(("127.0.0.1", ports.pop()))


def test_a_port_something_listens_on_is_never_chosen():
    listening = []
    try:
        for _ in range(50):
            server = socket.socket()
            server.bind(("127.0.0.1", free_port()))
            server.listen()
            listening.append(server)
        taken = {server.getsockname()[1] for server in listening}
        assert len(taken) == 50
        assert not taken & {free_port() for _ in range(2000)}
    finally:
        for server in listening:
            server.close()
