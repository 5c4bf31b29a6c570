"""Resource validation rules, checked against requests and node capacity."""

import operator as op
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import EngineError, RenderError, RuleError
from .paths import join_path
from .quantity import is_quantity, parse_quantity
from .render import check_syntax, referenced_variables, render

OPERATORS = ("GT", "GE", "LT", "LE", "EQ", "NE")
NODE_TOKENS = ("K8_CPU", "K8_GPU", "K8_MEMORY", "K8_STORAGE")
NODE_PREFIX = "K8_"

_COMPARE = {"GT": op.gt, "GE": op.ge, "LT": op.lt, "LE": op.le, "EQ": op.eq, "NE": op.ne}
_REQUIRED = ("operator", "left_operand", "right_operand")
_KEYS = (*_REQUIRED, "assert_message")
_VALID_OPERATORS = ", ".join(OPERATORS)


@dataclass(frozen=True)
class Rule:
    operator: str
    left_operand: Any
    right_operand: Any
    assert_message: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Rule":
        if not isinstance(data, Mapping):
            raise RuleError(f"rule must be an object, got {type(data).__name__}")
        missing = [key for key in _REQUIRED if key not in data]
        if missing:
            raise RuleError(f"rule is missing {', '.join(missing)}")
        return cls(
            operator=data["operator"],
            left_operand=data["left_operand"],
            right_operand=data["right_operand"],
            assert_message=data.get("assert_message") or "",
        )

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in _KEYS}

    @property
    def is_node_rule(self) -> bool:
        names = referenced_variables([self.left_operand, self.right_operand, self.assert_message])
        return any(name.startswith(NODE_PREFIX) for name in names)


@dataclass(frozen=True)
class NodeResources:
    name: str
    cpu: Any
    gpu: Any
    memory: Any
    storage: Any

    def tokens(self) -> dict[str, Any]:
        return {
            "K8_CPU": self.cpu,
            "K8_GPU": self.gpu,
            "K8_MEMORY": self.memory,
            "K8_STORAGE": self.storage,
        }


@dataclass
class RuleReport:
    errors: list[str] = field(default_factory=list)
    node_failures: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors


def _operands(rule: Rule, variables: Mapping[str, Any]) -> tuple[Any, Any]:
    return (
        render(rule.left_operand, variables, "left_operand"),
        render(rule.right_operand, variables, "right_operand"),
    )


def check_rule(rule: Rule, variables: Mapping[str, Any]) -> bool:
    compare = _COMPARE.get(rule.operator) if isinstance(rule.operator, str) else None
    if compare is None:
        raise RuleError(
            f"unknown operator {rule.operator!r}; valid operators: {_VALID_OPERATORS}",
            "operator",
        )
    left, right = _operands(rule, variables)
    if is_quantity(left) and is_quantity(right):
        return compare(parse_quantity(left), parse_quantity(right))
    if rule.operator in ("EQ", "NE"):
        return compare(str(left), str(right))
    raise RuleError(
        f"cannot apply {rule.operator} to {left!r} and {right!r}: ordering needs two resource quantities"
    )


def failure_message(rule: Rule, variables: Mapping[str, Any]) -> str:
    if rule.assert_message:
        try:
            return str(render(rule.assert_message, variables, "assert_message"))
        except EngineError:
            pass
    try:
        left, right = _operands(rule, variables)
    except EngineError:
        left, right = rule.left_operand, rule.right_operand
    return f"{left} {rule.operator} {right} failed"


def _rule_error(index: int, rule: Any, exc: EngineError) -> str:
    name = rule.get("operator") if isinstance(rule, Mapping) else getattr(rule, "operator", None)
    name = name or "?"
    return f"rule {index} ({name}): {exc}"


def _check(index: int, rule: Rule, variables: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """Return (failure message, error entry); both None when the rule holds."""
    try:
        if check_rule(rule, variables):
            return None, None
    except EngineError as exc:
        entry = _rule_error(index, rule, exc)
        return entry, entry
    return failure_message(rule, variables), None


def evaluate_rules(
    rules: Sequence[Rule | Mapping[str, Any]], variables: Mapping[str, Any], nodes: Sequence[NodeResources]
) -> RuleReport:
    report = RuleReport()
    node_rules: list[tuple[int, Rule]] = []
    for index, rule in enumerate(rules):
        try:
            if isinstance(rule, Mapping):
                rule = Rule.from_dict(rule)
            if rule.is_node_rule:
                node_rules.append((index, rule))
                continue
        except EngineError as exc:
            report.errors.append(_rule_error(index, rule, exc))
            continue
        failure, _ = _check(index, rule, variables)
        if failure:
            report.errors.append(failure)
    if node_rules:
        _evaluate_node_rules(node_rules, variables, nodes, report)
    return report


def _evaluate_node_rules(
    node_rules: list[tuple[int, Rule]],
    variables: Mapping[str, Any],
    nodes: Sequence[NodeResources],
    report: RuleReport,
) -> None:
    if not nodes:
        indices = ", ".join(str(index) for index, _ in node_rules)
        report.errors.append(
            f"No node is available to check the node resource rules against (rules {indices})"
        )
        return
    broken: dict[int, str] = {}
    fits = False
    for node in nodes:
        scope = {**variables, **node.tokens()}
        failures = []
        for index, rule in node_rules:
            failure, error = _check(index, rule, scope)
            if failure:
                failures.append(failure)
            if error:
                broken.setdefault(index, error)
        if failures:
            report.node_failures[node.name] = failures
        else:
            fits = True
    # Errors on some nodes only mean those nodes are unusable, not that the rule is.
    if not fits:
        report.errors.extend(broken.values())
        lines = [f"- {name}: {'; '.join(msgs)}" for name, msgs in report.node_failures.items()]
        report.errors.append("\n".join(["No node satisfies the resource rules:", *lines]))


def validate_rule_shape(data: Mapping[str, Any], path: str = "") -> Rule:
    if not isinstance(data, Mapping):
        raise RuleError(
            "rule must be an object with operator, left_operand, right_operand and optional assert_message",
            path,
        )
    unknown = sorted(str(key) for key in data if key not in _KEYS)
    if unknown:
        raise RuleError(f"unknown rule keys: {', '.join(unknown)}", path)
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise RuleError(f"missing rule keys: {', '.join(missing)}", path)
    if data["operator"] not in OPERATORS:
        raise RuleError(
            f"unknown operator {data['operator']!r}; valid operators: {_VALID_OPERATORS}",
            join_path(path, "operator"),
        )
    for key in ("left_operand", "right_operand"):
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise RuleError(
                f"operand must be a string or number, got {type(value).__name__}",
                join_path(path, key),
            )
    message = data.get("assert_message", "")
    if not isinstance(message, str):
        raise RuleError(
            f"assert_message must be a string, got {type(message).__name__}",
            join_path(path, "assert_message"),
        )
    for key in _KEYS:
        if key in data:
            try:
                check_syntax(data[key], join_path(path, key))
            except RenderError as exc:
                raise RuleError(exc.message, exc.path) from exc
    return Rule.from_dict(data)
