"""The demo's broker (osmo_site/sqlite_broker.py: kombu's SQLAlchemy transport on a SQLite file) with several
processes putting and taking at once, as the demo's web process, beat and three workers do: every message is taken
whole and exactly once, and none is left behind. Kombu's filesystem transport, the demo's broker before, handed a
second reader a half-written message (JSONDecodeError killed `worker-admission`, issue 44)."""

import json
import multiprocessing
import sqlite3
from pathlib import Path

import pytest
from kombu import Connection

from osmo_site.sqlite_broker import Transport
from tests.support.memory_files import memory_directory

PRODUCERS, CONSUMERS, EACH = 4, 3, 150
PAD = "x" * 4000  # messages of a few kB, like a task's, so that a write takes a while


def produce(url: str, sender: int) -> None:
    with Connection(url, transport=Transport) as connection:
        queue = connection.SimpleQueue("load")
        for number in range(EACH):
            queue.put({"sender": sender, "number": number, "pad": PAD})
        queue.close()


def consume(url: str, out: str) -> None:
    taken = []
    with Connection(url, transport=Transport) as connection:
        queue = connection.SimpleQueue("load")
        while True:
            message = queue.get(timeout=300)  # a ceiling against hanging only
            message.ack()
            if message.payload == "stop":
                break
            assert message.payload["pad"] == PAD
            taken.append([message.payload["sender"], message.payload["number"]])
        queue.close()
    with open(out, "w") as file:
        json.dump(taken, file)


@pytest.fixture
def broker_dir(tmp_path):
    """The broker's file in memory: each put and take is a commit, and 1,200 waits for the disk were most of the
    test's seconds, which show nothing about whole messages taken once (tests/support/memory_files.py)."""
    with memory_directory(tmp_path) as directory:
        yield directory


def test_concurrent_writers_and_readers_take_every_message_whole_and_once(tmp_path, broker_dir):
    url = f"sqlite:///{broker_dir / 'broker.sqlite3'}"
    # A fresh process (no copy of this one's threads or connections) that has imported kombu, SQLAlchemy and the
    # transport once, and forks each producer and consumer from itself: seven `spawn`s each paid those imports,
    # which are not what the test is about.
    spawn = multiprocessing.get_context("forkserver")
    spawn.set_forkserver_preload([__name__])
    with Connection(url, transport=Transport) as connection:
        connection.SimpleQueue("load").close()  # the tables made first, as `manage.py demo` does
    outs = [str(tmp_path / f"taken-{index}.json") for index in range(CONSUMERS)]
    consumers = [spawn.Process(target=consume, args=(url, out)) for out in outs]
    producers = [spawn.Process(target=produce, args=(url, sender)) for sender in range(PRODUCERS)]
    for process in consumers + producers:
        process.start()
    for process in producers:
        process.join()
    with Connection(url, transport=Transport) as connection:
        queue = connection.SimpleQueue("load")
        for _ in consumers:
            queue.put("stop")  # after every message of the producers: the queue is first in, first out
        queue.close()
    for process in consumers:
        process.join()
    assert [process.exitcode for process in producers + consumers] == [0] * (PRODUCERS + CONSUMERS)
    taken = [tuple(item) for out in outs for item in json.loads(Path(out).read_text())]
    assert sorted(taken) == [(sender, number) for sender in range(PRODUCERS) for number in range(EACH)]
    assert all(json.loads(Path(out).read_text()) for out in outs)  # each reader took some: they did read at once
    with sqlite3.connect(broker_dir / "broker.sqlite3") as database:
        assert database.execute("SELECT count(*) FROM kombu_message").fetchone() == (0,)  # taken is deleted
