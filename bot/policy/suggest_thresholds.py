"""How much evidence `policy suggest` needs: its own module, so that the command's flags and
their defaults are known without loading the suggesting."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Thresholds"]


@dataclass(frozen=True)
class Thresholds:
    """How much evidence a suggestion needs (each a `policy suggest` flag)."""

    min_approvals: int = 10  # approved calls inside the suggested region
    min_people: int = 2  # distinct people among their approvers
    max_values: int = 10  # distinct values a path may hold for an `in` list
    min_per_value: int = 3  # approvals of each value an `in` list names
