"""Pure-Python core (no Django): names and refusals, quantities, timeouts, template rendering and
merging, resource validation rules, and access policies (`pools.engine.policies`)."""

from .errors import EngineError, QuantityError, RenderError, RuleError, TimeoutFormatError
from .exit_actions import EXIT_ACTIONS, check_exit_actions, exit_code_ranges
from .jsonread import TooLarge, check_tree, read_json, read_yaml, read_yaml_all
from .jsonread import read_json as parse_json
from .merge import merge, merge_all
from .names import NAME_MAX_LENGTH, NAME_PATTERN, ConfigError, check_name
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
    "EXIT_ACTIONS",
    "NAME_MAX_LENGTH",
    "NAME_PATTERN",
    "NODE_TOKENS",
    "OPERATORS",
    "ConfigError",
    "EngineError",
    "NodeResources",
    "QuantityError",
    "RenderError",
    "Rule",
    "RuleError",
    "RuleReport",
    "TimeoutFormatError",
    "TooLarge",
    "check_exit_actions",
    "check_name",
    "check_rule",
    "check_syntax",
    "check_tree",
    "evaluate_rules",
    "exit_code_ranges",
    "failure_message",
    "is_quantity",
    "merge",
    "merge_all",
    "parse_json",
    "parse_quantity",
    "parse_timeout",
    "read_json",
    "read_yaml",
    "read_yaml_all",
    "referenced_variables",
    "render",
    "validate_rule_shape",
]
