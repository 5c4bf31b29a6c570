"""The stand-in API server while down keeps its port: a client's connection fails at once, and no other server (as
another xdist worker's) can take the port and answer this one's clients, even with connections still in TIME_WAIT
on it; start() serves again on the same port with the same objects."""

import http.client
import socket

import pytest

from pools.cluster.interface import ClusterError
from tests.kube_objects import make_node
from tests.kube_standin import HANG


def connection_fails(port: int) -> bool:
    """Refused or reset, as a client of a server that is gone sees it; never an answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=HANG) as connection:
            connection.sendall(b"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\n\r\n")
            return connection.recv(1) == b""
    except (ConnectionRefusedError, ConnectionResetError):
        return True


def other_server_takes(port: int) -> bool:
    other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as http.server's servers do
    try:
        other.bind(("127.0.0.1", port))
        other.listen()
        return True
    except OSError:
        return False
    finally:
        other.close()


def test_a_stopped_server_keeps_its_port_and_serves_again_on_start(standin, kube):
    standin.add_node(make_node("gpu-1"))
    # A kept-alive connection, which stop() cuts.
    assert [n["metadata"]["name"] for n in kube.list_nodes().items] == ["gpu-1"]

    standin.stop()
    assert connection_fails(standin.port)
    assert not other_server_takes(standin.port)
    with pytest.raises(ClusterError):
        kube.list_nodes()

    standin.start()
    assert [n["metadata"]["name"] for n in kube.list_nodes().items] == ["gpu-1"]


def test_a_kept_alive_connection_that_escaped_the_cut_is_not_answered_while_down(standin):
    """A connection accepted while stop() ran registers after stop() looked at the open ones; as that one, this test's
    connection is taken out of the stand-in's list before stop(). Kept alive, it must not go on being answered."""
    connection = http.client.HTTPConnection("127.0.0.1", standin.port, timeout=HANG)
    connection.request("GET", "/api/v1/nodes")
    first = connection.getresponse()
    assert first.status == 200 and b'"items"' in first.read()
    with standin._cond:
        standin._connections.clear()
    standin.stop()
    with pytest.raises((http.client.HTTPException, OSError)):
        connection.request("GET", "/api/v1/nodes")
        connection.getresponse().read()
    connection.close()
