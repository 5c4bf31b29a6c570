"""Deterministic randomness, and the small helpers every part of the simulation shares.

Whatever the simulation draws comes from a hash of what it is drawn for (the seed, a node's name, a tick...), so
every process computes the same cluster without talking to the others.
"""

import functools
import gc
import hashlib
import json
import random
import time
import uuid
from typing import Any

_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet


def stable_hash(*parts: Any) -> int:
    text = "\x1f".join(map(str, parts)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def stable_rng(*parts: Any) -> random.Random:
    return random.Random(stable_hash(*parts))


def stable_uid(*parts: Any) -> str:
    return str(uuid.UUID(int=(stable_hash(*parts, "hi") << 64) | stable_hash(*parts, "lo"), version=4))


def stable_suffix(length: int, *parts: Any) -> str:
    value, out = stable_hash(*parts), []
    for _ in range(length):
        value, index = divmod(value, len(_SUFFIX_ALPHABET))
        out.append(_SUFFIX_ALPHABET[index])
    return "".join(out)


def stable_hex(length: int, *parts: Any) -> str:
    return f"{stable_hash(*parts):016x}"[:length]


@functools.lru_cache(maxsize=16384)
def timestamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def compact_dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def bulk_loads(text: str) -> Any:
    # Decoding a full list makes some 400k dicts, lists and strings, enough to set off full collections that walk
    # every live object of the process; decoded JSON holds no reference cycles, so pausing the collector is safe.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return json.loads(text)
    finally:
        if enabled:
            gc.enable()
