"""Pure-Python core of pool configuration: quantities, timeouts, template
rendering and merging, and resource validation rules."""

from .errors import EngineError, QuantityError, RenderError, RuleError, TimeoutFormatError
from .merge import merge, merge_all
from .quantity import is_quantity, parse_quantity
from .render import check_syntax, referenced_variables, render
from .rules import (
    NODE_TOKENS,
    OPERATORS,
    NodeResources,
    Rule,
    RuleReport,
    check_rule,
    evaluate_rules,
    failure_message,
    validate_rule_shape,
)
from .timeouts import parse_timeout

__all__ = [
    "NODE_TOKENS",
    "OPERATORS",
    "EngineError",
    "NodeResources",
    "QuantityError",
    "RenderError",
    "Rule",
    "RuleError",
    "RuleReport",
    "TimeoutFormatError",
    "check_rule",
    "check_syntax",
    "evaluate_rules",
    "failure_message",
    "is_quantity",
    "merge",
    "merge_all",
    "parse_quantity",
    "parse_timeout",
    "referenced_variables",
    "render",
    "validate_rule_shape",
]
