"""A streamed answer read in a thread of its own, as a client reads a followed log: what arrived so far, and an
Event set once the stream ended."""

import threading


def read_in_background(response) -> tuple[list[bytes], threading.Event]:
    received, done = [], threading.Event()

    def read():
        for chunk in response.streaming_content:
            received.append(chunk)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    return received, done
