"""A policy whose calls Cedar decides: a `.cedar` file, or a TOML file naming one (`[cedar]`).

The TOML file keeps what Cedar does not say: tenants and their surfaces, defaults, staff,
people, operations, and per tool what a card shows and what happens while nobody answers
(`kind`, `redact`, `show`, `editable`, `remind_after`, `escalate`, `handoff`,
`parameters_schema`). A key that decides a call is Cedar's alone, so one set beside
`[cedar]` is refused, naming it: two sources would have to be merged, and that is a guess.
"""

from __future__ import annotations

from pathlib import Path

from bot.policy.cedar import CedarSource
from bot.policy.schema import PolicyFile
from bot.policy.schema_types import Table
from contracts.errors import PolicyError

# The tool keys that decide a call: Cedar's, when `[cedar]` names the policies.
DECIDING = (
    "confirm",
    "approvers",
    "timeout",
    "deny",
    "deny_reason",
    "allow_below",
    "deny_above",
    "quorum",
    "separate_duties",
    "when",
)


def _set_keys(section: Table) -> list[str]:
    return [k for k in DECIDING if k in section.model_fields_set]


def refused_keys(file: PolicyFile) -> list[str]:
    """Every deciding key set beside `[cedar]`, as a problem naming it."""
    sections: list[tuple[str, Table]] = [(f"tools.{n}", s) for n, s in file.tools.items()]
    sections += [(f"operations.{n}", s) for n, s in file.operations.items()]
    for tenant, t in file.tenants.items():
        sections += [(f"tenants.{tenant}.tools.{n}", s) for n, s in t.tools.items()]
        sections += [(f"tenants.{tenant}.operations.{n}", s) for n, s in t.operations.items()]
    return [
        f"{path}.{key}: decided by the Cedar policies named in [cedar]; write it there "
        "(`cosigner policy to-cedar` shows how), or remove [cedar]"
        for path, section in sections
        for key in _set_keys(section)
    ]


def source_of(file: PolicyFile, base: Path | None, source: str) -> CedarSource | None:
    """The Cedar source `[cedar]` names (relative to the TOML file's folder), or None."""
    if file.cedar is None:
        return None
    problems = refused_keys(file)
    if problems:
        raise PolicyError(problems, source)
    folder = base or Path()
    schema = folder / file.cedar.schema_file if file.cedar.schema_file is not None else None
    return CedarSource.load(folder / file.cedar.policies, schema)
