"""The one sandbox every template a user can reach renders in (OSMO workflow files, pod templates, validation
rules): Jinja2's `SandboxedEnvironment` with budgets checked while it runs, so a 131-byte template cannot take a
gigabyte or a minute before anything is measured.

- every value an operation makes (`*`, `**`, `+`, `%`, a call, a filter, `range()`, a block's or macro's text)
  is checked against `max_value` (characters or items, nested values counted each time they appear) and
  integers against `max_int_digits`, *before* it is made where its size can be known in advance;
- everything made is also charged to `max_work`, so many values each under the limit cannot add up;
- the rendered text is streamed and counted against `max_output`;
- the clock (`clock`, injectable) is read at every operation, loop iteration and output chunk: past
  `max_seconds` rendering stops.

Filters are wrapped so that none is folded at compile time (a folded `"A"|center(10**9)` would run before any
check). Exceeding a limit raises `BudgetExceeded`; `template_line` finds the template line of any error.
Pure Python: no Django (the limits come in as `Limits`; `scheduling` reads them from the settings).
"""

import codecs
import re
import time
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from string import Formatter
from types import TracebackType
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator
from jinja2.sandbox import SandboxedEnvironment, SecurityError
from jinja2.utils import _PassArg

# Read when a render starts; tests replace it to step time without waiting.
clock: Callable[[], float] = time.monotonic

SETTINGS = {"max_output": "OSMO_RENDER_MAX_OUTPUT", "max_value": "OSMO_RENDER_MAX_VALUE",
            "max_int_digits": "OSMO_RENDER_MAX_INT_DIGITS", "max_work": "OSMO_RENDER_MAX_WORK",
            "max_seconds": "OSMO_RENDER_MAX_SECONDS", "max_slow_input": "OSMO_RENDER_MAX_SLOW_INPUT"}
_UNITS = {"max_output": "characters", "max_value": "characters or items", "max_int_digits": "digits",
          "max_work": "characters or items made in all", "max_seconds": "seconds",
          "max_slow_input": "characters given to a method or filter whose time grows faster than its input"}


@dataclass(frozen=True)
class Limits:
    max_output: int = 1_000_000
    max_value: int = 1_000_000
    max_int_digits: int = 1_000
    max_work: int = 10_000_000
    max_seconds: float = 1.0
    max_slow_input: int = 10_000
    clock: Callable[[], float] | None = None  # None: this module's `clock`, read when the render starts


# The limits a render uses when given none (set from the settings by `pools.render_limits`).
defaults = Limits()


class BudgetExceeded(Exception):
    """A render went past one of its `Limits`; `limit` is the setting's name."""

    line: int | None = None  # set where no template frame is on the traceback (the rendered text's size)

    def __init__(self, key: str, limits: Limits, what: str):
        self.limit = SETTINGS[key]
        self.value = getattr(limits, key)
        shown = f"{self.value:,}" if isinstance(self.value, int) else f"{self.value:g}"
        super().__init__(f"{what}: over the limit {self.limit} = {shown} {_UNITS[key]}")


class _Budget:
    def __init__(self, limits: Limits):
        self.limits = limits
        self.clock = limits.clock or clock
        self.deadline = self.clock() + limits.max_seconds
        self.work = 0

    def exceeded(self, key: str, what: str) -> BudgetExceeded:
        return BudgetExceeded(key, self.limits, what)

    def tick(self) -> None:
        if self.clock() > self.deadline:
            raise self.exceeded("max_seconds", "rendering took too long")

    def charge(self, amount: int, what: str) -> None:
        self.work += amount
        if self.work > self.limits.max_work:
            raise self.exceeded("max_work", f"{what} brings what rendering made to {self.work:,}")

    def fits(self, size: int, what: str) -> None:
        if size > self.limits.max_value:
            raise self.exceeded("max_value", f"{what} would make a value of {size:,} or more")

    def slow(self, size: int, what: str) -> None:
        """A call that runs inside one operation (the clock is not read until it returns) and whose time grows
        faster than its input: refused above a small input, where its worst case is milliseconds."""
        if size > self.limits.max_slow_input:
            raise self.exceeded("max_slow_input", f"{what} is given {size:,} characters")

    def digits(self, value: int, what: str) -> None:
        digits = _digits(value)
        if digits > self.limits.max_int_digits:
            raise self.exceeded("max_int_digits", f"{what} would make an integer of about {digits:,} digits")

    def made(self, value: Any, what: str) -> Any:
        """Check and charge a value just made."""
        if isinstance(value, int) and not isinstance(value, bool):
            self.digits(value, what)
        size = weight(value, self.limits.max_value)
        self.fits(size, what)
        self.charge(size, what)
        return value


_current: ContextVar[_Budget | None] = ContextVar("render_budget", default=None)


def _budget() -> _Budget:
    # Outside `budget()` (a direct use of the environment) the default limits hold, per operation.
    return _current.get() or _Budget(defaults)


class budget:
    """`with budget(limits):` every render inside shares one budget (time, work)."""

    def __init__(self, limits: Limits | None = None):
        self.limits = limits or defaults

    def __enter__(self) -> _Budget:
        self.state = _Budget(self.limits)
        self.token = _current.set(self.state)
        return self.state

    def __exit__(self, *exc: object) -> None:
        _current.reset(self.token)


def _digits(value: int) -> int:
    return int(abs(value).bit_length() * 0.30103) + 1


def weight(value: Any, cap: int) -> int:
    """Characters or items `value` holds, nested values counted each time they appear (as printing or joining it
    would); the walk stops once past `cap`."""
    kind = type(value)
    if kind is str or kind is bytes:  # the common cases first: this runs for every value made
        return len(value)
    if kind is int:
        return _digits(value)
    if kind is float or kind is bool or value is None:
        return 1
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            total += _digits(item)
        elif isinstance(item, (list, tuple, set, frozenset, dict, range)):
            total += len(item) + 1
            if total <= cap and not isinstance(item, range):
                stack.extend(item.items() if isinstance(item, dict) else item)
        else:
            total += 1
        if total > cap:
            return total
    return total


def _arguments_weight(args: tuple, kwargs: dict, cap: int) -> int:
    return sum(weight(arg, cap) for arg in args) + sum(weight(arg, cap) for arg in kwargs.values())


def _sized(value: Any, b: _Budget, what: str) -> Any:
    """An iterable as a list (a generator is drawn with the clock running and its size counted)."""
    if isinstance(value, (str, list, tuple, dict, set, frozenset, range)):
        return value
    items, size = [], 0
    for item in value:
        b.tick()
        size += weight(item, b.limits.max_value) + 1
        b.fits(size, what)
        items.append(item)
    return items


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\d+|\*)?(?:\.(\d+|\*))?")


def _big_ints(args: Iterable[Any], b: _Budget, what: str) -> None:
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool) and arg > b.limits.max_value:
            b.fits(arg, what)


def _check_width(run: str, b: _Budget, what: str) -> None:
    if len(run) > 9 or int(run) > b.limits.max_value:
        b.fits(int(run[:12]), what)


def _percent_widths(text: str, args: list, b: _Budget, what: str) -> None:
    """`%`-formatting's widths and precisions (`*` takes them from the arguments)."""
    for match in _PERCENT_SPEC.finditer(text):
        for run in match.groups():
            if run == "*":
                _big_ints(args, b, what)
            elif run:
                _check_width(run, b, what)


def _brace_widths(text: str, args: list, b: _Budget, what: str) -> None:
    """`str.format`'s widths and precisions (a nested `{}` takes them from the arguments)."""
    try:
        specs = [spec for _literal, _field, spec, _conversion in Formatter().parse(text) if spec]
    except ValueError:
        return  # malformed: format() refuses it itself
    for spec in specs:
        if "{" in spec:
            _big_ints(args, b, what)
        for run in _DIGIT_RUN.findall(spec):
            _check_width(run, b, what)


_DIGIT_RUN = re.compile(r"\d+")


def _format_args(right: Any) -> list:
    if isinstance(right, tuple):
        return list(right)
    if isinstance(right, Mapping):
        return list(right.values())
    return [right]


def _mapping_values(args: tuple) -> list:
    return list(args[0].values()) if len(args) == 1 and isinstance(args[0], Mapping) else []


def _repeat_size(left: Any, right: Any, b: _Budget) -> int | None:
    for seq, count in ((left, right), (right, left)):
        if isinstance(seq, (str, bytes, list, tuple)) and isinstance(count, int) and not isinstance(count, bool):
            return weight(seq, b.limits.max_value) * max(count, 0) if count > 0 else 0
    return None


def _check_binop(operator: str, left: Any, right: Any, b: _Budget) -> None:
    what = f"{operator!r}"
    ints = all(isinstance(x, int) and not isinstance(x, bool) for x in (left, right))
    if operator == "*":
        size = _repeat_size(left, right, b)
        if size is not None:
            b.fits(size, f"repeating a value ({what})")
        elif ints and _digits(left) + _digits(right) > b.limits.max_int_digits + 1:
            raise b.exceeded("max_int_digits", f"multiplying would make an integer of about "
                                               f"{_digits(left) + _digits(right):,} digits")
    elif operator == "**" and ints and right > 0 and abs(left) > 1:
        digits = int(abs(left).bit_length() * 0.30103 * right)
        if digits > b.limits.max_int_digits:
            raise b.exceeded("max_int_digits", f"{left} ** {right} would make an integer of about {digits:,} digits")
    elif operator == "+" and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
        b.fits(weight(left, b.limits.max_value) + weight(right, b.limits.max_value), f"adding ({what})")
    elif operator == "%" and isinstance(left, str):
        _percent_widths(left, _format_args(right), b, f"formatting ({what})")


_PADDING = {"ljust", "rjust", "center", "zfill", "expandtabs"}
# CPython searches backwards (rfind, rindex, rsplit with a separator, rpartition) in time that grows as the text's
# length times the needle's: `('a'*999996).rfind('a'*249999 ~ 'b' ~ 'a'*249999)` took 35 CPU s in one call.
_REVERSE_SEARCH = {"rfind", "rindex", "rsplit", "rpartition"}
# Codecs whose time is linear in the text; others are not (punycode: 16,000 characters took 11 CPU s).
_LINEAR_CODECS = {"utf-8", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "ascii",
                  "iso8859-1"}


def _check_codec(args: tuple, kwargs: dict, what: str) -> None:
    name = _arg(args, kwargs, 0, "encoding", "utf-8")
    try:
        known = codecs.lookup(name).name if isinstance(name, str) else None
    except LookupError:
        known = None
    if known not in _LINEAR_CODECS:
        raise SecurityError(f"{what}: the codec {name!r} is not available in templates (use utf-8, utf-16, "
                            "utf-32, ascii or latin-1)")
_GROWING = {"append", "extend", "insert", "update", "add", "setdefault", "union", "intersection", "difference",
            "symmetric_difference", "intersection_update", "difference_update", "symmetric_difference_update"}
_ONE_ITEM = {"append", "insert", "add", "setdefault"}


def _check_method(obj: Any, args: tuple, kwargs: dict, b: _Budget) -> tuple:
    """Pre-checks for the built-in methods whose result size an argument sets; returns the arguments (a lazy
    iterable drawn)."""
    owner, name = getattr(obj, "__self__", None), getattr(obj, "__name__", "")
    if args or kwargs:  # list literals are made unchecked
        b.fits(_arguments_weight(args, kwargs, b.limits.max_value), "a call's arguments")
    if isinstance(owner, (str, bytes)):
        if name in _REVERSE_SEARCH and (name != "rsplit" or _arg(args, kwargs, 0, "sep", None) is not None):
            b.slow(len(owner) + _arguments_weight(args, kwargs, b.limits.max_value), f"{name}()")
        elif name in ("encode", "decode"):
            _check_codec(args, kwargs, f"{name}()")
        if name in _PADDING:
            _big_ints([*args, *kwargs.values()], b, f"{name}()")
        elif name == "join" and args:
            items = _sized(args[0], b, "join()")
            b.fits(weight(items, b.limits.max_value) + len(owner) * len(items), "join()")
            args = (items, *args[1:])
        elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
            count = owner.count(args[0]) if args[0] else len(owner) + 1
            b.fits(len(owner) + count * max(len(args[1]) - len(args[0]), 0), "replace()")
        elif name == "translate" and args and isinstance(args[0], Mapping):
            longest = max((len(v) for v in args[0].values() if isinstance(v, (str, bytes))), default=1)
            b.fits(len(owner) * max(longest, 1), "translate()")
    elif isinstance(owner, (list, dict, set)) and name in _GROWING:
        if name in _ONE_ITEM:
            b.fits(len(owner) + 1, f"{name}()")
        else:  # extend(l) on itself doubles it: the iterables are drawn and counted before the call
            args = tuple(_sized(arg, b, f"{name}()") for arg in args)
            b.fits(len(owner) + sum(len(arg) for arg in args) + len(kwargs), f"{name}()")
        b.charge(weight((args, kwargs), b.limits.max_value), f"{name}()")
    return args


def _call_filter(func: Callable, pass_arg: Any, context: Any, value: Any, args: tuple, kwargs: dict) -> Any:
    if pass_arg is _PassArg.context:
        return func(context, value, *args, **kwargs)
    if pass_arg is _PassArg.eval_context:
        return func(context.eval_ctx, value, *args, **kwargs)
    if pass_arg is _PassArg.environment:
        return func(context.environment, value, *args, **kwargs)
    return func(value, *args, **kwargs)


def _arg(args: tuple, kwargs: dict, index: int, name: str, default: Any) -> Any:
    return args[index] if len(args) > index else kwargs.get(name, default)


def _check_filter(name: str, value: Any, args: tuple, kwargs: dict, b: _Budget) -> Any:
    """Pre-checks for the filters whose result size an argument sets; returns `value`, drawn if it was lazy."""
    what = f"the filter {name}"
    if name in ("join", "list", "tojson", "pprint", "string", "unique", "sort", "reverse", "sum"):
        value = _sized(value, b, what)
    size = weight(value, b.limits.max_value)
    # A list literal ([s, s, s]) is made by no checked operation: what a filter is given is checked here.
    b.fits(size + (_arguments_weight(args, kwargs, b.limits.max_value) if args or kwargs else 0), what)
    if name == "center":
        width = _arg(args, kwargs, 0, "width", 80)
        b.fits(max(width if isinstance(width, int) else 0, size), what)
    elif name == "indent":
        width = _arg(args, kwargs, 0, "width", 4)
        width = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        b.fits(size + (str(value).count("\n") + 1) * max(width, 0), what)
    elif name == "wordwrap":  # textwrap's time grows faster than the text (width 1 on 500,000 characters: 20 s)
        b.slow(size, what)
        width = _arg(args, kwargs, 0, "width", 79)
        wrap = _arg(args, kwargs, 3, "wrapstring", "\n") or "\n"
        lines = size // max(width, 1) + 1 if isinstance(width, int) else size
        b.fits(size + lines * len(str(wrap)), what)
    elif name == "join":
        joiner = _arg(args, kwargs, 0, "d", "")
        b.fits(size + len(str(joiner)) * len(value), what)
    elif name == "replace":
        old, new = _arg(args, kwargs, 0, "old", ""), _arg(args, kwargs, 1, "new", "")
        b.fits(size, what)
        text = str(value)  # jinja2 replaces in the text of any value (`12|replace('1', ...)`)
        count = (text.count(str(old)) if old else len(text) + 1)
        b.fits(len(text) + count * max(len(str(new)) - len(str(old)), 0), what)
    elif name == "format" and isinstance(value, str):
        _percent_widths(value, [*args, *kwargs.values()], b, what)
    elif name in ("slice", "batch"):  # slice(n) makes n lists; batch(n, fill) pads the last to n items
        count = _arg(args, kwargs, 0, "slices" if name == "slice" else "linecount", 1)
        b.fits(count if isinstance(count, int) else 0, what)
    elif name == "tojson":
        indent = _arg(args, kwargs, 0, "indent", None)
        width = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
        b.fits(size * 6 * (1 + max(width, 0)), what)
    elif name in ("pprint", "string", "urlize", "xmlattr", "urlencode"):
        b.fits(size, what)
    return value


def _wrap_filter(name: str, func: Callable) -> Callable:
    pass_arg = _PassArg.from_obj(func)

    @jinja2.pass_context  # never folded at compile time, where no budget runs
    def checked(context, value, *args, **kwargs):
        b = _budget()
        b.tick()
        value = _check_filter(name, value, args, kwargs, b)
        return b.made(_call_filter(func, pass_arg, context, value, args, kwargs), f"the filter {name}")

    checked.__name__ = f"budgeted_{name}"
    return checked


def _range(*args: int) -> range:
    b = _budget()
    numbers = range(*args)
    b.fits(len(numbers), "range()")
    return numbers


@jinja2.pass_context
def _loop(context, iterable: Any, text: int = 0):
    """Every `{% for %}` iterates through this: the clock is read and the body's literal text charged each turn."""
    b = _budget()
    b.tick()
    for item in iterable:
        b.tick()
        b.charge(text + 1, "a loop")
        yield item


LOOP_FILTER = "_budgeted_loop"


def _literal_text(node: nodes.Node) -> int:
    """Characters of literal text a loop body writes each turn (nested loops charge their own)."""
    total, stack = 0, list(node.iter_child_nodes(exclude=("iter", "target", "test", "else_")))
    while stack:
        child = stack.pop()
        if isinstance(child, nodes.TemplateData):
            total += len(child.data)
        elif not isinstance(child, (nodes.For, nodes.Macro)):
            stack.extend(child.iter_child_nodes())
    return total


class _Generator(CodeGenerator):
    def visit_Template(self, node: nodes.Template, frame=None) -> None:
        # Before the parent binds the filters a template uses: every loop's iterable goes through LOOP_FILTER.
        for loop in node.find_all(nodes.For):
            if not (isinstance(loop.iter, nodes.Filter) and loop.iter.name == LOOP_FILTER):
                loop.iter = nodes.Filter(loop.iter, LOOP_FILTER, [nodes.Const(_literal_text(loop))], [], None, None,
                                         lineno=loop.lineno).set_environment(self.environment)
        super().visit_Template(node, frame)

    def visit_Concat(self, node: nodes.Concat, frame) -> None:
        # `a ~ b` is not an intercepted operator: it goes through the environment's checked join instead.
        self.write("environment.concat((")
        for item in node.nodes:
            self.write("str(")
            self.visit(item, frame)
            self.write("), ")
        self.write("))")


class BudgetedEnvironment(SandboxedEnvironment):
    code_generator_class = _Generator
    intercepted_binops = frozenset({"*", "**", "+", "%", "//", "/"})

    def __init__(self, **options: Any):
        super().__init__(finalize=self._finalize, **options)
        self.filters = {name: _wrap_filter(name, func) for name, func in self.filters.items()}
        self.filters[LOOP_FILTER] = _loop
        self.globals["range"] = _range
        self.globals.pop("lipsum", None)  # n paragraphs of lorem ipsum: nothing a workflow needs

    def call_binop(self, context, operator: str, left: Any, right: Any) -> Any:
        b = _budget()
        b.tick()
        _check_binop(operator, left, right, b)
        return b.made(super().call_binop(context, operator, left, right), f"{operator!r}")

    def call(__self, __context, __obj, *args, **kwargs):
        b = _budget()
        b.tick()
        args = _check_method(__obj, args, kwargs, b)
        result = b.made(super().call(__context, __obj, *args, **kwargs), "a call")
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, (list, dict, set)):
            b.fits(len(owner), f"{getattr(__obj, '__name__', 'a method')}()")
        return result

    def wrap_str_format(self, value: Any):
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        text = value.__self__

        def checked(*args: Any, **kwargs: Any) -> str:
            b = _budget()
            _brace_widths(text, [*args, *kwargs.values(), *_mapping_values(args)], b, f"{value.__name__}()")
            return b.made(wrapped(*args, **kwargs), f"{value.__name__}()")
        return checked

    def concat(self, pieces: Iterable[str]) -> str:  # type: ignore[override]  # blocks, macros, `~`
        b = _budget()
        pieces = _sized(pieces, b, "joining text")
        b.fits(sum(map(len, pieces)), "joining text")
        return "".join(pieces)

    @staticmethod
    def _finalize(value: Any) -> Any:
        """Every `{{ ... }}` written, at any level: counted, and a container checked before Python prints it."""
        b = _current.get()
        if b is None:
            return value
        if type(value) is str:  # the common case, kept short: jinja2 calls this for every `{{ }}`
            b.work += len(value)
            if b.work > b.limits.max_work:
                b.charge(0, "writing")
            return value
        if not isinstance(value, (int, float)):
            b.fits(weight(value, b.limits.max_value) * 10, "printing a value")  # repr may escape each character
        text = str(value)
        b.charge(len(text), "writing")
        return text


environment = BudgetedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)


def stream(template: jinja2.Template, variables: Mapping[str, Any]) -> str:
    """Render `template` inside the current budget, counting the text as it is produced (as
    `jinja2.Template.generate`, whose generator is kept to name the line where the text went over)."""
    b = _budget()
    chunks, size = [], 0
    generator = template.root_render_func(template.new_context(dict(variables)))
    try:
        for chunk in generator:
            size += len(chunk)
            if size > b.limits.max_output:
                error = b.exceeded("max_output", f"the rendered text reaches {size:,}")
                error.line = template.get_corresponding_lineno(generator.gi_frame.f_lineno)
                raise error
            chunks.append(chunk)
    except BudgetExceeded as exc:
        if getattr(exc, "line", None):
            raise
        template.environment.handle_exception()
    except Exception:
        template.environment.handle_exception()  # re-raised with the template's lines in its traceback
    return "".join(chunks)


def template_line(exc: BaseException) -> int | None:
    """The template line where `exc` happened (the innermost one), if a template's code raised it."""
    line = getattr(exc, "lineno", None) if isinstance(exc, jinja2.TemplateSyntaxError) else getattr(exc, "line", None)
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        template = tb.tb_frame.f_globals.get("__jinja_template__")
        if template is not None:
            line = template.get_corresponding_lineno(tb.tb_lineno)
        elif tb.tb_frame.f_code.co_filename == "<template>":  # jinja2 rewrote the frame to the template's line
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def render_text(source: str, variables: Mapping[str, Any], limits: Limits | None = None) -> str:
    """A whole text as one template (an OSMO workflow file), inside a fresh budget."""
    with budget(limits):
        return stream(environment.from_string(source), variables)
