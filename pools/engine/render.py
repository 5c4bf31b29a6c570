"""Rendering of Jinja2 templates embedded in JSON-like structures, in the budgeted sandbox (`.sandbox`): one
budget per `render` call, shared by every string of the structure."""

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

import jinja2
import jinja2.meta
import jinja2.nodes
from jinja2.sandbox import SecurityError

from .errors import RenderError
from .paths import join_path
from .sandbox import BudgetExceeded, Limits, budget, stream, template_line
from .sandbox import environment as env

_MARKERS = ("{{", "{%", "{#")
# Leading/trailing "-" or "+" directly against the braces is whitespace
# control, not part of the expression.
_SINGLE_EXPRESSION = re.compile(r"\{\{[-+]?(.*?)[-+]?\}\}", re.DOTALL)
_UNDEFINED_NAME = re.compile(r"'(.+)' is undefined")


def _is_template(value: str) -> bool:
    return any(marker in value for marker in _MARKERS)


@functools.lru_cache(maxsize=4096)
def _parse(source: str) -> jinja2.nodes.Template:
    return env.parse(source)


@functools.lru_cache(maxsize=4096)
def _variables(source: str) -> frozenset[str]:
    return frozenset(jinja2.meta.find_undeclared_variables(_parse(source)))


def _is_single_expression(tree: jinja2.nodes.Template) -> bool:
    if len(tree.body) != 1 or not isinstance(tree.body[0], jinja2.nodes.Output):
        return False
    parts = tree.body[0].nodes
    return len(parts) == 1 and not isinstance(parts[0], jinja2.nodes.TemplateData)


@functools.lru_cache(maxsize=4096)
def _compile(source: str) -> tuple[bool, Any]:
    """Return (is_native, callable) for a template string."""
    if _is_single_expression(_parse(source)):
        match = _SINGLE_EXPRESSION.fullmatch(source)
        if match is not None:
            try:
                return True, env.compile_expression(match[1], undefined_to_none=False)
            except jinja2.TemplateSyntaxError:
                pass  # e.g. "{{ x }}{# note #}": comments leave no node but are not expression text
    return False, env.from_string(source)


def _syntax_error(exc: jinja2.TemplateSyntaxError, path: str) -> RenderError:
    return RenderError(f"template syntax error: {exc.message} (line {exc.lineno})", path)


def _undefined_error(exc: jinja2.UndefinedError, path: str) -> RenderError:
    match = _UNDEFINED_NAME.fullmatch(exc.message or "")
    message = f"undefined variable '{match[1]}'" if match else str(exc.message)
    return RenderError(message, path)


def _native_undefined(value: jinja2.Undefined, path: str) -> RenderError:
    try:
        str(value)  # strict and sandbox undefineds raise their explanation here
    except jinja2.UndefinedError as exc:
        return _undefined_error(exc, path)
    except SecurityError as exc:
        return RenderError(f"unsafe template refused: {exc}", path)
    return RenderError("expression is undefined", path)


def _line(exc: BaseException) -> str:
    line = template_line(exc)
    return f" (line {line})" if line else ""


def _render_string(source: str, variables: Mapping[str, Any], path: str) -> Any:
    try:
        native, compiled = _compile(source)
        result = compiled(variables) if native else stream(compiled, variables)
    except jinja2.TemplateSyntaxError as exc:
        raise _syntax_error(exc, path) from exc
    except jinja2.UndefinedError as exc:
        raise _undefined_error(exc, path) from exc
    except SecurityError as exc:
        raise RenderError(f"unsafe template refused: {exc}", path) from exc
    except BudgetExceeded as exc:
        raise RenderError(f"{exc}{_line(exc)}", path) from exc
    except RecursionError as exc:
        raise RenderError(f"rendering failed: recursion too deep{_line(exc)}", path) from None
    except Exception as exc:  # templates are user input; report any failure in place
        raise RenderError(f"rendering failed: {type(exc).__name__}: {exc}{_line(exc)}", path) from exc
    if isinstance(result, jinja2.Undefined):
        raise _native_undefined(result, path)
    return result


def render(value: Any, variables: Mapping[str, Any], path: str = "", limits: Limits | None = None) -> Any:
    with budget(limits):
        return _render_value(value, variables, path)


def _render_value(value: Any, variables: Mapping[str, Any], path: str) -> Any:
    if isinstance(value, str):
        return _render_string(value, variables, path) if _is_template(value) else value
    if isinstance(value, Mapping):
        return {k: _render_value(v, variables, join_path(path, k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_render_value(v, variables, join_path(path, i)) for i, v in enumerate(value)]
    return value


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield value, path
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, join_path(path, key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _strings(item, join_path(path, index))


def referenced_variables(value: Any, path: str = "") -> set[str]:
    names: set[str] = set()
    for source, where in _strings(value, path):
        if _is_template(source):
            try:
                names |= _variables(source)
            except jinja2.TemplateSyntaxError as exc:
                raise _syntax_error(exc, where) from exc
    return names


def check_syntax(value: Any, path: str = "") -> None:
    for source, where in _strings(value, path):
        if _is_template(source):
            try:
                _parse(source)
            except jinja2.TemplateSyntaxError as exc:
                raise _syntax_error(exc, where) from exc
