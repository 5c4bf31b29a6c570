"""Label and field selectors as a kube-apiserver reads them, for the stand-in (tests/kube_standin.py).

Written from the Kubernetes grammar (k8s.io/apimachinery pkg/labels/selector.go and pkg/fields/selector.go, and
the field labels each kind's conversion accepts), not from our product's code, so that the stand-in is an
independent oracle for what a real server accepts. Errors carry the real server's messages; it answers them 400.

Labels: `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key`, `!key`, `key>1`,
`key<1`, comma-separated (all must hold), whitespace between tokens ignored. Fields: `field=value`,
`field==value`, `field!=value`, comma-separated, nothing trimmed, `\\`, `\\,` and `\\=` escapes in values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any


class SelectorError(ValueError):
    """A selector the API server refuses (400 BadRequest, the message as the server words it)."""


# Labels: lexer ------------------------------------------------------------------------------------------------

_SPECIAL = "=!(),><"
_WHITESPACE = " \t\r\n"
_TOKENS = {")": "closed", ",": "comma", "!": "not", "==": "==", "=": "=", ">": ">", "in": "in", "<": "<",
           "!=": "!=", "notin": "notin", "(": "open"}
_BINARY = "in, notin, =, ==, !=, gt, lt"  # as the server lists its binary operators


def _lex(text: str) -> list[tuple[str, str]]:
    """(token, literal) pairs ending with ("end", "")."""
    items: list[tuple[str, str]] = []
    position, length = 0, len(text)
    while True:
        while position < length and text[position] in _WHITESPACE:
            position += 1
        if position >= length:
            items.append(("end", ""))
            return items
        if text[position] in _SPECIAL:
            # The longest run of special characters that is still an operator ("!=" but "=" then "(").
            found = None
            end = position
            while end < length and text[end] in _SPECIAL:
                if text[position : end + 1] in _TOKENS:
                    found = end + 1
                elif found is not None:
                    break
                end += 1
            literal = text[position:found]
            items.append((_TOKENS[literal], literal))
            position = found
        else:
            end = position
            while end < length and text[end] not in _SPECIAL and text[end] not in _WHITESPACE:
                end += 1
            literal = text[position:end]
            items.append((_TOKENS.get(literal, "id") if literal in ("in", "notin") else "id", literal))
            position = end


# Labels: parser -----------------------------------------------------------------------------------------------

class _Parser:
    def __init__(self, text: str):
        self.items = _lex(text)
        self.position = 0

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        return self._token(self.items[self.position], values)

    def consume(self, values: bool = True) -> tuple[str, str]:
        self.position += 1
        return self._token(self.items[self.position - 1], values)

    @staticmethod
    def _token(item: tuple[str, str], values: bool) -> tuple[str, str]:
        # "in" and "notin" are operators only where an operator is expected: `x in (in)` is fine.
        token, literal = item
        return ("id" if values and token in ("in", "notin") else token), literal

    def parse(self) -> list[tuple[str, str, tuple[str, ...]]]:
        requirements = []
        while True:
            token, literal = self.lookahead()
            if token == "end":
                return requirements
            if token not in ("id", "not"):
                raise SelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except SelectorError as exc:
                raise SelectorError(f"unable to parse requirement: {exc}") from None
            token, literal = self.consume()
            if token == "end":
                return requirements
            if token != "comma":
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            token, literal = self.lookahead()
            if token not in ("id", "not"):
                raise SelectorError(f"found '{literal}', expected: identifier after ','")

    def requirement(self) -> tuple[str, str, tuple[str, ...]]:
        operator = ""
        token, literal = self.consume()
        if token == "not":
            operator = "!"
            token, literal = self.consume()
        if token != "id":
            raise SelectorError(f"found '{literal}', expected: identifier")
        key = literal
        _check_key(key)
        if self.lookahead()[0] in ("end", "comma"):
            return key, operator or "exists", ()
        if operator == "!":
            return key, "!", ()
        token, literal = self.consume(values=False)
        if token not in ("in", "notin", "=", "==", "!=", ">", "<"):
            raise SelectorError(f"found '{literal}', expected: {_BINARY}")
        operator = token
        values = self.value_set() if operator in ("in", "notin") else self.exact_value()
        _check_values(key, operator, values)
        return key, operator, values

    def value_set(self) -> tuple[str, ...]:
        token, literal = self.consume()
        if token != "open":
            raise SelectorError(f"found '{literal}' expected: '('")
        token, literal = self.lookahead()
        if token == "closed":  # "()" is the set of the empty value
            self.consume()
            return ("",)
        if token not in ("id", "comma"):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values: list[str] = []
        while True:
            token, literal = self.consume()
            if token == "id":
                values.append(literal)
                following, following_literal = self.lookahead()
                if following == "closed":
                    break
                if following != "comma":
                    raise SelectorError(f"found '{following_literal}', expected: ',' or ')'")
            elif token == "comma":  # empty values: "(,a)", "(a,)", "(a,,b)"
                if not values:
                    values.append("")
                following = self.lookahead()[0]
                if following in ("closed", "comma"):
                    values.append("")
                if following == "closed":
                    break
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")
        self.consume()  # the ")"
        return tuple(sorted(set(values)))

    def exact_value(self) -> tuple[str, ...]:
        if self.lookahead()[0] in ("end", "comma"):
            return ("",)
        token, literal = self.consume()
        if token != "id":
            raise SelectorError(f"found '{literal}', expected: identifier")
        return (literal,)


# Labels: validation, with the server's messages ---------------------------------------------------------------

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_MESSAGE = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
                 "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
                 "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_VALUE_MESSAGE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                  "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                  "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


def _key_errors(key: str) -> list[str]:
    parts = key.split("/")
    if len(parts) > 2:
        return ["a qualified name " + _NAME_MESSAGE.removeprefix("name part ") + " with an optional DNS subdomain "
                "prefix and '/' (e.g. 'example.com/MyName')"]
    errors = []
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253:
            errors.append("prefix part must be no more than 253 characters")
        elif not _DNS_SUBDOMAIN.fullmatch(prefix):
            errors.append("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                          "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
                          "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]"
                          "([-a-z0-9]*[a-z0-9])?)*')")
    else:
        name = key
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    elif not _NAME.fullmatch(name):
        errors.append(_NAME_MESSAGE)
    return errors


def _check_key(key: str) -> None:
    if errors := _key_errors(key):
        raise SelectorError(f'<nil>: Invalid value: "{key}": ' + "; ".join(errors))


def _check_values(key: str, operator: str, values: tuple[str, ...]) -> None:
    problems = []
    if operator in (">", "<"):
        for index, value in enumerate(values):
            if not re.fullmatch(r"[+-]?\d+", value):
                problems.append(f'values[{index}]: Invalid value: "{value}": for \'Gt\', \'Lt\' operators, the '
                                "value must be an integer")
    for index, value in enumerate(values):
        errors = []
        if len(value) > 63:
            errors.append("must be no more than 63 characters")
        if value and not _NAME.fullmatch(value):
            errors.append(_VALUE_MESSAGE)
        if errors:
            problems.append(f'values[{index}][{key}]: Invalid value: "{value}": ' + "; ".join(errors))
    if problems:
        raise SelectorError(problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")


def _holds(requirement: tuple[str, str, tuple[str, ...]], labels: Mapping[str, str]) -> bool:
    key, operator, values = requirement
    present = key in labels
    if operator in ("=", "==", "in"):
        return present and labels[key] in values
    if operator in ("!=", "notin"):
        return not present or labels[key] not in values
    if operator == "exists":
        return present
    if operator == "!":
        return not present
    try:  # ">" and "<": a label that is not an integer matches neither
        label, bound = int(labels[key]), int(values[0])
    except (KeyError, ValueError):
        return False
    return label > bound if operator == ">" else label < bound


def label_selector(text: str) -> Callable[[Mapping[str, str]], bool]:
    """A predicate over a label dict; raises SelectorError (the server's 400 message) for a malformed selector."""
    requirements = _Parser(text or "").parse()
    return lambda labels: all(_holds(requirement, labels) for requirement in requirements)


# Fields -------------------------------------------------------------------------------------------------------

def _split_terms(text: str) -> list[str]:
    """Comma-separated terms; an escaped comma stays inside its term (with its backslash)."""
    terms, start, escaped = [], 0, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _unescape(value: str) -> str:
    if not any(char in value for char in "\\,="):
        return value
    out, escaped = [], False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise SelectorError(f"invalid field selector: unescapedRune character in value: {ord(char)}")
        else:
            out.append(char)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str) -> list[tuple[str, str, str]]:
    """(field, "=" or "!=", value) terms; raises SelectorError for a malformed selector."""
    terms = []
    for part in sorted(_split_terms(text or "")) if text else []:
        if not part:
            continue
        # The first operator found splits the term: no escaping on the left.
        for index in range(len(part)):
            operator = next((op for op in ("!=", "==", "=") if part.startswith(op, index)), None)
            if operator:
                field, value = part[:index], _unescape(part[index + len(operator):])
                terms.append((field, "!=" if operator == "!=" else "=", value))
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
    return terms


def _path(*keys: str, boolean: bool = False) -> Callable[[dict], str]:
    def read(obj: dict) -> str:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if boolean:
            return "true" if value else "false"
        return "" if value is None else str(value)

    return read


def _first_pod_ip(obj: dict) -> str:
    ips = (obj.get("status") or {}).get("podIPs") or []
    if ips and isinstance(ips[0], dict):
        return str(ips[0].get("ip") or "")
    return str((obj.get("status") or {}).get("podIP") or "")


_NAME_FIELD = {"metadata.name": _path("metadata", "name")}
_NAMESPACED = {**_NAME_FIELD, "metadata.namespace": _path("metadata", "namespace")}
# The field labels each kind's conversion accepts (pkg/apis/core/v1/conversion.go, pkg/apis/batch/v1/...), with
# the values its registry's GetAttrs gives them.
FIELDS: dict[str, dict[str, Callable[[dict], str]]] = {
    "Node": {**_NAME_FIELD, "spec.unschedulable": _path("spec", "unschedulable", boolean=True)},
    "Pod": {
        **_NAMESPACED,
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": _path("spec", "hostNetwork", boolean=True),
        "status.phase": _path("status", "phase"),
        "status.podIP": _first_pod_ip,
        "status.podIPs": _first_pod_ip,
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "Job": {**_NAMESPACED, "status.successful": lambda obj: str((obj.get("status") or {}).get("succeeded") or 0)},
    "Namespace": {**_NAME_FIELD, "status.phase": _path("status", "phase")},
    "Event": {
        **_NAMESPACED,
        **{f"involvedObject.{key}": _path("involvedObject", key)
           for key in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
        "reason": _path("reason"), "reportingComponent": _path("reportingComponent"),
        "source": lambda obj: str((obj.get("source") or {}).get("component") or ""), "type": _path("type"),
    },
}
_ALIASES = {("Pod", "spec.host"): "spec.nodeName"}  # old v1 clients' name, still accepted


def field_selector(text: str, kind: str, *, namespaced: bool = True) -> Callable[[dict], bool] | None:
    """A predicate over an object of `kind` for `fieldSelector`, or None when empty. A kind not in FIELDS is a
    custom resource: metadata.name, and metadata.namespace when namespaced. Raises SelectorError for a malformed
    selector or a field the server does not support for the kind."""
    terms = parse_field_selector(text)
    if not terms:
        return None
    fields = FIELDS.get(kind) or (_NAMESPACED if namespaced else _NAME_FIELD)
    readers = []
    for field, operator, value in terms:
        field = _ALIASES.get((kind, field), field)
        if field not in fields:
            if kind == "Job":
                raise SelectorError(f'field label "{field}" not supported for Job')
            raise SelectorError(f"field label not supported: {field}")
        readers.append((fields[field], operator, value))
    return lambda obj: all((read(obj) == value) == (operator == "=") for read, operator, value in readers)
