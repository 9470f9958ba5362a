"""The lock file: each upstream tool's definition as it was approved, by digest.

`cosigner-mcp-gateway --pin FILE` keeps it. It is JSON the operator can commit and review:

    {
      "tools": {
        "issue_refund": {
          "definition": {"description": "Refund an order.", "inputSchema": {...}, "name": "issue_refund"},
          "digest": "sha256:0f3a…"
        }
      },
      "version": 1
    }

A tool's definition is what the model and the client read of it: its name, title,
description, input and output schemas and annotations, as the upstream lists them (not its
`_meta` or icons). The digest is `sha256:` and the hex SHA-256 of the definition's RFC 8785
canonical JSON, as Cosigner's parameters digest is. The file is written with sorted keys
and two-space indents (a change is a small diff), atomically (a temporary file in the same
folder, then renamed over it), and read strictly: anything but this shape, a key repeated
in one object, or a digest that is not its definition's (an entry edited by hand) is a
`LockFileError` naming the fix, and the gateway does not start.

Nothing here imports the `mcp` package: the lock file is plain data.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from cosigner import strict_json
from cosigner.digest import CanonicalFormError, canonical_json, digest_of_canonical

__all__ = ["DEFINITION_FIELDS", "LockFile", "LockFileError", "NewTools", "Pinned", "definition_digest"]

VERSION = 1
"""The lock file format this gateway reads and writes."""

DEFINITION_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
"""What is pinned of a tool (as the listing spells them): all the model and the client read."""

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class NewTools(StrEnum):
    """What the gateway does with a tool the lock file does not name (`--new-tools`)."""

    ASK = "ask"
    """Not offered until an approver approves its definition (the default)."""
    ALLOW = "allow"
    """Pinned as it is listed the first time it is seen, and offered."""
    DENY = "deny"
    """Never offered, and its calls refused; nobody is asked."""


class LockFileError(ValueError):
    """A lock file the gateway cannot use as one; the message names the file and the fix."""


@dataclass(frozen=True)
class Pinned:
    """One tool's approved definition and its digest."""

    definition: dict[str, Any]
    digest: str


def definition_digest(definition: Mapping[str, Any]) -> str:
    """`sha256:` + hex of the RFC 8785 canonical JSON of a tool's definition."""
    return digest_of_canonical(canonical_json(dict(definition), "definition"))


class LockFile:
    """The pinned definitions of one gateway's upstream, kept in `path`."""

    def __init__(self, path: Path, pins: dict[str, Pinned] | None = None) -> None:
        self.path = path
        self._pins: dict[str, Pinned] = dict(pins or {})

    @classmethod
    def load(cls, path: Path) -> LockFile:
        """The lock file at `path`; an empty one where there is no file yet (it is written on
        the first pin). Raises LockFileError for anything else that is not a lock file."""
        try:
            text = path.read_bytes()
        except FileNotFoundError:
            if not path.parent.is_dir():
                raise LockFileError(f"--pin {path}: the folder {path.parent} does not exist") from None
            return cls(path)
        except OSError as exc:
            raise LockFileError(f"--pin {path}: cannot be read ({exc.strerror or exc})") from None
        return cls(path, _parse(path, text))

    def get(self, tool: str) -> Pinned | None:
        """The pinned definition of `tool`, if any."""
        return self._pins.get(tool)

    def names(self) -> list[str]:
        """The pinned tools' names, sorted."""
        return sorted(self._pins)

    def pin(self, definition: Mapping[str, Any]) -> Pinned:
        """Record `definition` (with its `name`) as approved, and write the file at once."""
        pinned = Pinned(dict(definition), definition_digest(definition))
        pins = {**self._pins, str(definition["name"]): pinned}
        _write(self.path, pins)
        self._pins = pins  # only once it is on disk: what is offered is what the file says
        return pinned


def _parse(path: Path, text: bytes) -> dict[str, Pinned]:
    fix = "fix it, or delete it (each tool is then approved again)"
    reading = strict_json.read(text)
    if reading.error is not None:
        raise LockFileError(f"--pin {path} is not JSON ({reading.error}); {fix}")
    if reading.ambiguous:
        raise LockFileError(f"--pin {path}: {reading.problems[0]}")
    doc = reading.value
    if not isinstance(doc, dict) or set(doc) != {"tools", "version"}:
        raise LockFileError(f'--pin {path} is not a lock file (an object of "tools" and "version"); {fix}')
    if doc["version"] != VERSION or isinstance(doc["version"], bool):
        raise LockFileError(
            f"--pin {path} is version {doc['version']!r} of the lock file; "
            f"this gateway reads version {VERSION}"
        )
    tools = doc["tools"]
    if not isinstance(tools, dict):
        raise LockFileError(f'--pin {path}: "tools" must be an object of tool names; {fix}')
    pins: dict[str, Pinned] = {}
    for name, entry in tools.items():
        where = f"--pin {path}: tools[{json.dumps(name)}]"
        if not isinstance(entry, dict) or set(entry) != {"definition", "digest"}:
            raise LockFileError(f'{where} must be an object of "definition" and "digest"; {fix}')
        definition, digest = entry["definition"], entry["digest"]
        if not isinstance(definition, dict) or definition.get("name") != name:
            raise LockFileError(
                f"{where}.definition must be an object whose name is {json.dumps(name)}; {fix}"
            )
        unknown = sorted(set(definition) - set(DEFINITION_FIELDS))
        if unknown:
            raise LockFileError(
                f"{where}.definition has fields no definition holds ({', '.join(unknown)}); {fix}"
            )
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise LockFileError(f"{where}.digest must be sha256: and 64 lowercase hex digits; {fix}")
        try:
            actual = definition_digest(definition)
        except CanonicalFormError as exc:
            raise LockFileError(f"{where}.definition has no canonical form ({exc}); {fix}") from None
        if actual != digest:
            raise LockFileError(
                f"{where}.digest is not the digest of its definition (was the entry edited by hand?); "
                "remove the entry to have the tool approved again"
            )
        pins[name] = Pinned(definition, digest)
    return pins


def _write(path: Path, pins: Mapping[str, Pinned]) -> None:
    """Write the lock file atomically: a reader sees the old file or the new, never a part."""
    doc = {
        "tools": {name: {"definition": p.definition, "digest": p.digest} for name, p in pins.items()},
        "version": VERSION,
    }
    text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        # The operator's mode kept; a new file readable, as a file to commit is (mkstemp makes
        # it owner-only). Nothing in it is secret: definitions the upstream lists to anyone.
        os.chmod(temporary, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself survives a crash
    finally:
        os.close(folder)
