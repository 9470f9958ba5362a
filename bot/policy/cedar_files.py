"""A Cedar policy source's files: read, parsed, validated against the schema, and every
problem placed at its file, line and column.

cedarpy reports what is wrong but not where. A syntax error is placed by parsing ever
longer prefixes of the policy it is in: the shortest prefix that fails with the same
message (and not with "unexpected end of input") ends at the offending token. A validation
error names its policy (`policy3`, Cedar's id for the fourth statement), so it is placed at
that statement, and at the attribute it names where that is found inside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cedarpy

from contracts.errors import PolicyError

_EOF = "unexpected end of input"
_QUOTED = re.compile(r"`([^`]+)`")
_TOKEN = re.compile(r"unexpected token `([^`]+)`")


@dataclass(frozen=True, slots=True)
class Statement:
    """One policy of the file: Cedar's id for it (`policy0`), where it starts, its text."""

    id: str
    offset: int
    text: str


@dataclass(frozen=True, slots=True)
class CedarFiles:
    """The parsed policies and schema, each policy's annotations and place in the file."""

    policies_path: Path
    schema_path: Path
    policies: cedarpy.PolicySet
    schema: cedarpy.Schema
    text: str
    statements: Mapping[str, Statement]
    annotations: Mapping[str, Mapping[str, str]]
    # The EST (Cedar's JSON form) of each policy: what it reads of the context.
    bodies: Mapping[str, Any]

    def where(self, policy_id: str) -> str:
        """`agents.cedar:12:1`: where a policy starts."""
        statement = self.statements.get(policy_id)
        offset = statement.offset if statement is not None else 0
        return place(self.policies_path, self.text, offset)

    def name(self, policy_id: str) -> str:
        """A policy's name as explanations give it: its `@id` if it has one, else Cedar's id."""
        return self.annotations.get(policy_id, {}).get("id") or policy_id


def place(path: Path, text: str, offset: int) -> str:
    """`file:line:column` of a character offset (both counted from 1)."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"{path.name}:{line}:{column}"


def statements(text: str) -> list[Statement]:
    """Split policy text into its statements, skipping strings and comments, as Cedar numbers them."""
    found: list[Statement] = []
    start: int | None = None
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if start is None and not ch.isspace():
            start = i
        if ch == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch == ";" and start is not None:
            found.append(Statement(f"policy{len(found)}", start, text[start : i + 1]))
            start = None
        i += 1
    if start is not None:
        found.append(Statement(f"policy{len(found)}", start, text[start:]))
    return found


def _syntax_offset(text: str, parse: Callable[[str], object], message: str) -> int:
    """The offset of the token a parse error is about: where the shortest failing prefix ends."""
    for end in range(1, len(text) + 1):
        if end < len(text) and not text[end].isspace() and text[end - 1].isalnum() and text[end].isalnum():
            continue  # inside a word: no token ends here
        try:
            parse(text[:end])
        except ValueError as exc:
            said = str(exc)
            if _EOF not in said and said == message:
                # The parser may look one token past the one it names: find that one.
                named = _TOKEN.search(message)
                if named is not None and (at := text.rfind(named.group(1), 0, end)) >= 0:
                    return at
                token = text[:end].rstrip()
                j = len(token)
                while j > 0 and not token[j - 1].isspace() and token[j - 1] not in "(){}[];,":
                    j -= 1
                return j if j < len(token) else len(token) - 1
    return 0


def _parse_policies(path: Path, text: str) -> cedarpy.PolicySet:
    try:
        return cedarpy.PolicySet.from_str(text)
    except ValueError as exc:
        message = str(exc)
    for st in statements(text):
        try:
            cedarpy.PolicySet.from_str(st.text)
        except ValueError as exc:
            inner = _syntax_offset(st.text, cedarpy.PolicySet.from_str, str(exc))
            at = place(path, text, st.offset + inner)
            raise PolicyError([f"{at}: {exc}; fix the Cedar syntax there"], str(path)) from exc
    raise PolicyError([f"{place(path, text, 0)}: {message}; fix the Cedar syntax"], str(path))


def _parse_schema(path: Path, text: str) -> cedarpy.Schema:
    try:
        return cedarpy.Schema.from_str(text)
    except ValueError as exc:
        message = str(exc)
        offset = _syntax_offset(text, cedarpy.Schema.from_str, message)
        if offset == 0:
            named = re.search(r":\s*([A-Za-z_][\w:]*)\s*$", message)
            if named is not None:
                hit = re.search(rf"\b{re.escape(named.group(1))}\b", text)
                offset = hit.start() if hit is not None else 0
        at = place(path, text, offset)
        raise PolicyError([f"{at}: {message}; fix the Cedar schema there"], str(path)) from exc


def _named_offset(statement: Statement, message: str) -> int:
    """Where in a policy the first name the message quotes appears (0: not found)."""
    for quoted in _QUOTED.findall(message):
        leaf = quoted.rsplit(".", 1)[-1].strip('"')
        if leaf == statement.id or not leaf:
            continue
        hit = re.search(rf"(?<![\w]){re.escape(leaf)}(?![\w])", statement.text)
        if hit is not None:
            return hit.start()
    return 0


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(
            [f"{path}: cannot read the Cedar {what} ({exc.strerror}); check COSIGNER_POLICY"], str(path)
        ) from exc
    except UnicodeDecodeError as exc:
        raise PolicyError([f"{path}: not UTF-8 text; save the Cedar {what} as UTF-8"], str(path)) from exc


def load_cedar(policies_path: Path, schema_path: Path | None = None) -> CedarFiles:
    """Read, parse and validate a `.cedar` file against its schema (`X.cedarschema` beside it
    unless named); raise `PolicyError` naming each problem's file, line and column."""
    schema_path = schema_path or policies_path.with_suffix(".cedarschema")
    if not schema_path.is_file():
        raise PolicyError(
            [
                f"{schema_path}: no Cedar schema; write one beside {policies_path.name} "
                '(docs/cedar.md gives the entity model), or name it with [cedar] schema = "…"'
            ],
            str(policies_path),
        )
    text = _read(policies_path, "policies")
    schema_text = _read(schema_path, "schema")
    schema = _parse_schema(schema_path, schema_text)
    policies = _parse_policies(policies_path, text)
    placed = {s.id: s for s in statements(text)}
    est = json.loads(cedarpy.policies_to_json_str(text))
    bodies: dict[str, Any] = est.get("staticPolicies", {})
    if est.get("templates"):
        raise PolicyError(
            [f"{policies_path}: Cedar templates are not supported; write each policy out"], str(policies_path)
        )
    annotations = {pid: dict(body.get("annotations") or {}) for pid, body in bodies.items()}
    files = CedarFiles(policies_path, schema_path, policies, schema, text, placed, annotations, bodies)
    result = cedarpy.validate_policies(text, schema)
    problems = []
    for error in result.errors:
        offset = placed[error.policy_id].offset if error.policy_id in placed else 0
        statement = placed.get(error.policy_id)
        if statement is not None:
            offset += _named_offset(statement, error.error)
        problems.append(
            f"{place(policies_path, text, offset)}: {error.error} (validated against {schema_path.name})"
        )
    if problems:
        raise PolicyError(problems, str(policies_path))
    return files
