"""The one reader of untrusted JSON (API bodies, admin JSON fields, CLI files) and the checks YAML inputs
share once loaded. Refused with a `ConfigError` naming where (a JSON path such as
`pools.training.platforms.gpu`):

- bodies over `max_bytes` (`TooLarge`, which the API answers 413);
- nesting deeper than `max_depth`, found by an iterative scan of the raw text before `json.loads`
  (so 10,000 `[` never reach the recursive decoder) and by an iterative walk of loaded YAML;
- `NaN`, `Infinity`, `-Infinity`, integers of more than `MAX_NUMBER_DIGITS` digits and floats that
  overflow to infinity (`1e309`);
- NUL characters and lone surrogates in any key or string (PostgreSQL and UTF-8 cannot store them);
- YAML whose aliases would expand past `MAX_EXPANDED` characters and items (a 100 KB string referenced 1,000
  times is 100 MB once stored as JSON), or that refers to itself, measured on the composed nodes before
  anything is built.

Pure Python: no Django (the limits come in as arguments; `pools.api.parsers` reads the settings).
"""

import json
import math
import re
from itertools import accumulate
from typing import Any

import yaml

from .names import ConfigError

MAX_BYTES = 2 * 1024 * 1024
MAX_DEPTH = 64
MAX_NUMBER_DIGITS = 100
# Characters of scalars plus nodes of a YAML document with its aliases expanded (set from OSMO_YAML_MAX_EXPANDED).
MAX_EXPANDED = 4 * 1024 * 1024

# A JSON string, escapes included (unrolled so the regex engine never backtracks far); what is left
# of the text after removing strings holds the structure's brackets.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")


class TooLarge(ConfigError):
    """The input is over the size limit (the API's 413)."""


class _Refused:
    """What a parse hook returns for a number it refuses; the walk then names where it was."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


def _constant(name: str) -> _Refused:
    return _Refused(f"{name} is not a number JSON allows")


def _int(text: str) -> int | _Refused:
    if len(text.lstrip("-")) > MAX_NUMBER_DIGITS:
        return _Refused(f"an integer of {len(text.lstrip('-'))} digits is too long (at most {MAX_NUMBER_DIGITS})")
    return int(text)


def _float(text: str) -> float | _Refused:
    if len(text) > MAX_NUMBER_DIGITS + 10:
        return _Refused(f"a number of {len(text)} characters is too long (at most {MAX_NUMBER_DIGITS} digits)")
    value = float(text)
    if math.isinf(value):
        return _Refused(f"{text} is too large for a number (it overflows to infinity)")
    return value


def _path(parts: tuple) -> str:
    return ".".join(str(part) for part in parts)


def _describe(text: str) -> str:
    bad = _BAD_CHARACTER.search(text)
    assert bad is not None
    return "a NUL character" if bad.group() == "\x00" else f"a lone surrogate (U+{ord(bad.group()):04X})"


def _where(source: str, parts: tuple) -> str:
    return f"{source} at {_path(parts)}" if parts else source


def check_tree(data: Any, source: str = "document", max_depth: int = MAX_DEPTH) -> Any:
    """Walk loaded data without recursion: refuse depth over `max_depth`, refused numbers (JSON's hooks, or
    YAML's `.nan`, `.inf` and huge integers), and NUL or lone surrogates in keys and strings."""
    stack: list[tuple[Any, tuple, int]] = [(data, (), 0)]
    budget = MAX_BYTES  # JSON text cannot hold more values than bytes; YAML aliases can (billion laughs)
    while stack:
        value, parts, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise ConfigError(f"{source} holds more than {MAX_BYTES} values", field="")
        if isinstance(value, (dict, list)):
            if depth >= max_depth:
                raise ConfigError(f"{_where(source, parts)} is nested more than {max_depth} levels deep",
                                  field=_path(parts))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            children = []
            for key, item in items:
                if isinstance(key, str) and _BAD_CHARACTER.search(key):
                    shown = (*parts, key.encode("unicode_escape").decode("ascii"))
                    raise ConfigError(f"{_where(source, shown)}: the key contains {_describe(key)}",
                                      field=_path(shown))
                children.append((item, (*parts, key), depth + 1))
            stack.extend(reversed(children))  # first error in document order
        elif isinstance(value, _Refused):
            raise ConfigError(f"{_where(source, parts)}: {value.reason}", field=_path(parts))
        elif isinstance(value, str):
            if _BAD_CHARACTER.search(value):
                raise ConfigError(f"{_where(source, parts)} contains {_describe(value)}", field=_path(parts))
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ConfigError(f"{_where(source, parts)}: {value} is not a number JSON allows",
                                  field=_path(parts))
        elif isinstance(value, int) and value.bit_length() > MAX_NUMBER_DIGITS * 3.33:  # about that many digits
            raise ConfigError(f"{_where(source, parts)}: an integer of more than {MAX_NUMBER_DIGITS} digits "
                                  "is too long", field=_path(parts))
    return data


def _bracket_depth(text: str) -> int:
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if not brackets:
        return 0
    return max(accumulate(1 if char in "[{" else -1 for char in brackets))


def read_json(text: str | bytes, source: str = "document", *, max_bytes: int = MAX_BYTES,
              max_depth: int = MAX_DEPTH) -> Any:
    """Parse untrusted JSON: line and column for malformed text, a path for refused values."""
    if len(text) > max_bytes:
        raise TooLarge(f"{source} is larger than {max_bytes} bytes", field=source)
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{source} is not UTF-8 text (byte {exc.start})") from None
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise TooLarge(f"{source} is larger than {max_bytes} bytes", field=source)
    if not text.strip():
        raise ConfigError(f"{source} is empty; expected a JSON object")
    if _bracket_depth(text) > max_depth:
        raise ConfigError(f"{source} is nested more than {max_depth} levels deep", field="")
    try:
        data = json.loads(text, parse_constant=_constant, parse_int=_int, parse_float=_float)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source} is malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
            field=f"line {exc.lineno}, column {exc.colno}",
        ) from None
    except RecursionError:  # unreachable after the scan; kept so no input can make this a crash
        raise ConfigError(f"{source} is nested too deeply", field=source) from None
    return check_tree(data, source, max_depth)


def _yaml_error(exc: yaml.YAMLError, source: str, what: str) -> ConfigError:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return ConfigError(f"{source} {what}{where}: {getattr(exc, 'problem', None) or exc}", field="file")


def _expanded_size(root: yaml.Node, limit: int, source: str) -> int:
    """The size of a composed document once every alias is expanded: scalars' characters plus one per node,
    each shared node counted once per reference (as `json.dumps` would write it), without expanding anything."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = len(node.value) + 1
            continue
        children = [item for pair in node.value for item in pair] if isinstance(node, yaml.MappingNode) \
            else list(node.value)
        if done:
            open_nodes.discard(key)
            sizes[key] = min(1 + sum(sizes[id(child)] for child in children), limit + 1)
            continue
        if key in open_nodes:
            mark = node.start_mark
            raise ConfigError(f"{source} refers to itself through an alias (line {mark.line + 1})", field="file")
        open_nodes.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                mark = child.start_mark
                raise ConfigError(f"{source} refers to itself through an alias (line {mark.line + 1})",
                                  field="file")
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _load(text: str, source: str, what: str, max_depth: int, max_expanded: int | None, every: bool) -> list[Any]:
    limit = MAX_EXPANDED if max_expanded is None else max_expanded
    try:
        loader = yaml.SafeLoader(text)  # reads the text at once: a non-printable character is refused here
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source, what) from None
    documents = []
    try:
        # One document: as `yaml.safe_load`, a second one is an error.
        nodes = iter(lambda: loader.get_node() if loader.check_node() else None, None) if every \
            else [loader.get_single_node()]
        for node in nodes:
            if node is not None and _expanded_size(node, limit, source) > limit:
                raise ConfigError(f"{source} expands past the limit OSMO_YAML_MAX_EXPANDED = {limit:,} characters "
                                  "and items once its aliases are expanded", field="file")
            documents.append(None if node is None else loader.construct_document(node))
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source, what) from None
    except RecursionError:
        raise ConfigError(f"{source} is nested more than {max_depth} levels deep", field="file") from None
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{source} {what}: {exc}", field="file") from None  # a huge integer, a bad date
    finally:
        loader.dispose()
    return documents


def read_yaml_all(text: str, source: str = "document", *, what: str = "is not valid YAML",
                  max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH, max_expanded: int | None = None
                  ) -> list[Any]:
    """Every document of a YAML stream (JSON is YAML), each through `check_tree`; `None` documents kept."""
    if len(text) > max_bytes:
        raise TooLarge(f"{source} is larger than {max_bytes} bytes", field=source)
    if "\x00" in text:
        raise ConfigError(f"{source} contains a NUL character", field="file")
    documents = _load(text, source, what, max_depth, max_expanded, every=True)
    for index, document in enumerate(documents):
        check_tree(document, source if len(documents) == 1 else f"{source} (document {index + 1})", max_depth)
    return documents


def read_yaml(text: str, source: str = "document", *, what: str = "is not valid YAML",
              max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH, max_expanded: int | None = None) -> Any:
    """One YAML document (the first; `None` for an empty file), checked like JSON."""
    if len(text) > max_bytes:
        raise TooLarge(f"{source} is larger than {max_bytes} bytes", field=source)
    if "\x00" in text:
        raise ConfigError(f"{source} contains a NUL character", field="file")
    return check_tree(_load(text, source, what, max_depth, max_expanded, every=False)[0], source, max_depth)
