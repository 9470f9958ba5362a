"""The policy: its TOML file (schema, validation, the one merge), the rules worked out from it,
and what it decides for a call (checks, redaction, routing, the decision, its tests and replay).
"""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.policy.cases import (
        ENABLED,
        CaseFileError,
        assumed_sender,
        junit,
        load_cases,
        parse_surface,
        run_cases,
    )
    from bot.policy.cedar_decision import cedar_rule
    from bot.policy.checks import callback_allowed, json_limits, surface_belongs
    from bot.policy.decision import Ruling, differences, rule_on
    from bot.policy.durations import format_duration, parse_duration
    from bot.policy.operation_rules import OperationRule
    from bot.policy.redaction import REDACTED, redact
    from bot.policy.routing import SmsSender, route_for
    from bot.policy.rules import Policy, ToolRule, load_policy, load_policy_file, mode_of, operation_tool_rule
    from bot.policy.step_up_checks import step_up_paths

__all__ = [
    "ENABLED",
    "REDACTED",
    "CaseFileError",
    "OperationRule",
    "Policy",
    "Ruling",
    "SmsSender",
    "ToolRule",
    "assumed_sender",
    "callback_allowed",
    "cedar_rule",
    "differences",
    "format_duration",
    "json_limits",
    "junit",
    "load_cases",
    "load_policy",
    "load_policy_file",
    "mode_of",
    "operation_tool_rule",
    "parse_duration",
    "parse_surface",
    "redact",
    "route_for",
    "rule_on",
    "run_cases",
    "step_up_paths",
    "surface_belongs",
]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.policy.cases": [
            "ENABLED",
            "CaseFileError",
            "assumed_sender",
            "junit",
            "load_cases",
            "parse_surface",
            "run_cases",
        ],
        "bot.policy.cedar_decision": ["cedar_rule"],
        "bot.policy.checks": ["callback_allowed", "json_limits", "surface_belongs"],
        "bot.policy.decision": ["Ruling", "rule_on", "differences"],
        "bot.policy.durations": ["format_duration", "parse_duration"],
        "bot.policy.operation_rules": ["OperationRule"],
        "bot.policy.redaction": ["REDACTED", "redact"],
        "bot.policy.routing": ["SmsSender", "route_for"],
        "bot.policy.rules": [
            "Policy",
            "ToolRule",
            "load_policy",
            "load_policy_file",
            "mode_of",
            "operation_tool_rule",
        ],
        "bot.policy.step_up_checks": ["step_up_paths"],
    },
)
