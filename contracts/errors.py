"""Every error Cosigner raises on purpose: the API's classes, defined in `cosigner.errors`, and PolicyError.

Foreign errors (SQLAlchemy, slack_sdk, twilio) are translated into these at the boundary
where they occur and never cross into the engine.
"""

from __future__ import annotations

# Every public name, so a class added there is importable here without an edit.
from cosigner.errors import *  # noqa: F403


class PolicyError(Exception):
    """The policy file is invalid (never on the wire); `problems` lists each as "key.path: what to do"."""

    def __init__(self, problems: list[str], source: str = "policy") -> None:
        self.problems = problems
        self.source = source
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{source} has {len(problems)} problem(s):\n{lines}")
