"""Parse policy durations such as "45s", "5m", "1h", "2d" into seconds."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")


def parse_duration(text: object) -> float:
    """Return seconds for a duration string; raise ValueError naming the accepted forms."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise ValueError('must be a duration string such as "45s", "5m", "1h" or "2d"')
    if isinstance(text, int):
        raise ValueError(f'must be a string with a unit, such as "{text}s"')
    match = _PATTERN.match(text)
    if not match:
        raise ValueError(f'"{text}" is not a duration; write e.g. "45s", "5m", "1h" or "2d"')
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise ValueError("must be longer than zero")
    return seconds


def format_duration(seconds: float) -> str:
    """Render seconds the way a policy file writes them."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    # Not `:g`, which writes 1000000 as "1e+06", a form parse_duration rejects.
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{seconds:f}".rstrip("0") + "s"
