"""Cedar as a policy source: what its one Allow or Deny means for a call, as a tool rule.

Cedar answers Allow or Deny and names the policies that determined it. Cosigner reads three
outcomes from that answer and those policies' annotations:

- Deny, determined by a `forbid`: the call is refused (`@reason("…")` says why).
- Allow, determined by a `permit` annotated `@approval("ask")` (or `"ask_always"`): a
  person decides, as the annotations say (`@approvers`, `@quorum`, `@step_up`, `@timeout`).
  An asking permit outweighs a plain one that matches too.
- Allow by plain permits only: the call runs with nobody asked.
- Deny with no policy determining it (no permit matched): the gate's default for a tool it
  does not know, a person decides (danger, `ask_always`).

A call whose context Cedar cannot type against the schema, or on which a policy fails to
evaluate, is asked the same way, never allowed, and the explanation gives the reason.

The outcome is a `ToolRule` like a TOML rule, so the rest of the engine (routing, quorum,
timeouts, follow-ups, standing denies and allows) is the same for both sources. Everything a
decision reads is parsed once per policy load, and a decision is remembered by the request
Cedar was given (with only what the policies read of it), so a repeated call is not
evaluated again. Cedar is given only the policies whose scope lets them apply to the call's
tool and action (`cedar_scope`), and equal answers share one rule, so a call Cedar has not
seen costs one evaluation and no more.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import cedarpy

from bot.policy.cedar_entities import EntityCache, Untypable, context_of, hints, uid
from bot.policy.cedar_files import CedarFiles, load_cedar
from bot.policy.cedar_scope import Scopes
from bot.policy.durations import parse_duration
from bot.policy.tool_rule import ToolRule
from contracts.enums import ApprovalMode, ApproverKind, ToolKind
from contracts.errors import PolicyError

_ASKS = {"ask": ApprovalMode.ASK, "ask_always": ApprovalMode.ASK_ALWAYS}
_KNOWN = {"id", "approval", "approvers", "quorum", "step_up", "timeout", "reason"}
_MEMO = 4096
_UNQUOTED = re.compile(r"`\{.*\}` (?=is not valid)", re.S)


# The rule a call is decided by, the (key path, says) steps, why it was asked as unknown.
Ruled = tuple[ToolRule, tuple[tuple[str, str], ...], str | None]


@dataclass(frozen=True, slots=True)
class Ask:
    """What an asking permit's annotations say."""

    mode: ApprovalMode
    approvers: tuple[ApproverKind, ...] | None
    quorum: int | None
    step_up: bool
    timeout: float | None


@dataclass(frozen=True, slots=True)
class Verdict:
    """What Cedar decided for one request: the outcome and the policies that determined it."""

    deny: bool
    ask: Ask | None  # None with deny False: allowed; with no `by`: nobody permitted it
    by: tuple[str, ...]
    problem: str | None = None  # why the call is asked as unknown (untypable, an error)


def _annotations_problems(files: CedarFiles) -> tuple[dict[str, Ask], list[str]]:
    asks: dict[str, Ask] = {}
    problems: list[str] = []
    step_up_known = "step_up" in {f.name for f in fields(ToolRule)}
    for pid, notes in files.annotations.items():
        at = files.where(pid)
        effect = files.bodies[pid].get("effect")
        for key in notes:
            if key not in _KNOWN:
                problems.append(
                    f"{at}: @{key} is not an annotation Cosigner reads; use one of {sorted(_KNOWN)}"
                )
        approval = notes.get("approval")
        if approval is None:
            for key in ("approvers", "quorum", "step_up", "timeout"):
                if key in notes:
                    problems.append(f'{at}: @{key} without @approval("ask"): add it, or remove @{key}')
            continue
        if effect != "permit":
            problems.append(f"{at}: @approval on a forbid; a forbid refuses, only a permit can ask")
            continue
        if approval not in _ASKS:
            problems.append(f'{at}: @approval("{approval}") must be "ask" or "ask_always"')
            continue
        approvers = None
        if "approvers" in notes:
            names = [n.strip() for n in notes["approvers"].split(",") if n.strip()]
            valid = {k.value for k in ApproverKind}
            bad = [n for n in names if n not in valid]
            if bad or not names:
                problems.append(
                    f"{at}: @approvers names {bad or 'nobody'}; use {sorted(valid)}, comma-separated"
                )
                continue
            approvers = tuple(ApproverKind(n) for n in names)
        quorum = None
        if "quorum" in notes:
            if not notes["quorum"].isdigit() or int(notes["quorum"]) < 1:
                problems.append(f'{at}: @quorum("{notes["quorum"]}") must be a whole number of at least 1')
                continue
            quorum = int(notes["quorum"])
        step_up = notes.get("step_up", "false")
        if step_up not in ("true", "false"):
            problems.append(f'{at}: @step_up("{step_up}") must be "true" or "false"')
            continue
        if step_up == "true" and not step_up_known:
            problems.append(f"{at}: @step_up is not supported by this server; remove it")
            continue
        timeout = None
        if "timeout" in notes:
            try:
                timeout = parse_duration(notes["timeout"])
            except ValueError as exc:
                problems.append(f'{at}: @timeout("{notes["timeout"]}"): {exc}')
                continue
        asks[pid] = Ask(_ASKS[approval], approvers, quorum, step_up == "true", timeout)
    return asks, problems


def _key(tenant: str, agent: str, tool: str, action: str, context: Mapping[str, Any]) -> Hashable:
    """A request as a memo key: a tuple where every value is a scalar (typed, since `True == 1`
    for a tuple), else canonical JSON."""
    flat: list[Any] = [tenant, agent, tool, action]
    for name in sorted(context):
        value = context[name]
        if isinstance(value, dict):
            for k in sorted(value):
                v = value[k]
                if isinstance(v, dict | list):
                    return json.dumps([tenant, agent, tool, action, context], sort_keys=True)
                flat += (name, k, type(v).__name__, v)
        else:
            flat += (name, type(value).__name__, value)
    return tuple(flat)


class CedarSource:
    """A validated Cedar policy set with its schema, ready to decide calls."""

    __slots__ = ("_asks", "_entities", "_memo", "_rules", "_scopes", "files")

    def __init__(self, files: CedarFiles) -> None:
        self.files = files
        asks, problems = _annotations_problems(files)
        if problems:
            raise PolicyError(problems, str(files.policies_path))
        self._asks = asks
        self._scopes = Scopes(files.bodies, files.policies)
        self._entities = EntityCache(files.schema)
        self._memo: OrderedDict[Hashable, Verdict] = OrderedDict()
        self._rules: dict[tuple[Verdict, str, int], tuple[ToolRule, Ruled]] = {}

    @classmethod
    def load(cls, policies: Path, schema: Path | None = None) -> CedarSource:
        """Read and validate the files; `PolicyError` names each problem's file, line and column."""
        return cls(load_cedar(policies, schema))

    def verdict(
        self,
        tenant: str,
        agent: str,
        tool: str,
        parameters: Mapping[str, Any],
        surface: str,
        requester: str,
        now: float,
        action: str = "call",
        typed: Mapping[str, str] | None = None,
    ) -> Verdict:
        """What Cedar decides for one call; `typed`: the extension types its tool's
        `parameters_schema` gives parameters (`cedar_entities.hints`)."""
        keys, names = self._scopes.reads(tool)
        try:
            context = context_of(parameters, names, surface, requester, now, typed)
        except Untypable as exc:
            return Verdict(False, None, (), f"the call cannot be typed for Cedar: {exc}")
        # What the policies do not read cannot change the answer: it is left out of the key.
        keyed = context if keys is None else {k: v for k, v in context.items() if k in keys}
        key = _key(tenant, agent, tool, action, keyed)
        found = self._memo.get(key)
        if found is not None:
            return found
        request = {
            "principal": uid("Agent", agent),
            "action": uid("Action", action),
            "resource": uid("Tool", tool),
            "context": context,
        }
        try:
            entities = self._entities.get(tenant, agent)
        except ValueError as exc:
            return Verdict(False, None, (), f"the agent or tenant cannot be typed for Cedar: {exc}")
        try:
            policies = self._scopes.policies(tool, action)
            result = cedarpy.is_authorized(request, policies, entities, self.files.schema)
        except ValueError as exc:  # cedarpy refused the request itself: asked, never allowed
            return Verdict(
                False, None, (), f"Cedar could not evaluate the call: {_UNQUOTED.sub('', str(exc))}"
            )
        found = self._read(result)
        self._memo[key] = found
        if len(self._memo) > _MEMO:
            self._memo.popitem(last=False)
        return found

    def _placed(self, policy_id: str) -> tuple[int, str]:
        statement = self.files.statements.get(policy_id)
        return (statement.offset if statement is not None else len(self.files.text), policy_id)

    def _read(self, result: cedarpy.AuthzResult) -> Verdict:
        diagnostics, decision = result.diagnostics, result.decision
        # Cedar names them in no fixed order: in the file's, so a path reads the same every time.
        reasons = tuple(sorted(diagnostics.reasons, key=self._placed))
        errors = diagnostics.errors
        if decision is cedarpy.Decision.Deny and reasons:
            return Verdict(True, None, reasons)  # a forbid matched: whatever else failed
        if errors:
            # Cedar quotes the context it refused; the parameters may hold secrets: not repeated.
            said = "; ".join(_UNQUOTED.sub("", e) for e in errors)
            if "failed to build request" in said or "is not valid for" in said:
                return Verdict(False, None, (), f"the call's context does not match the Cedar schema: {said}")
            return Verdict(False, None, (), f"a Cedar policy failed to evaluate on this call: {said}")
        if decision is not cedarpy.Decision.Allow:
            return Verdict(False, None, ())
        asking = [pid for pid in reasons if pid in self._asks]
        if not asking:
            return Verdict(False, None, reasons)
        differing = {self._asks[pid] for pid in asking}
        if len(differing) > 1:
            names = ", ".join(self.files.name(p) for p in asking)
            return Verdict(False, None, (), f"the asking permits {names} match with different annotations")
        return Verdict(False, self._asks[asking[0]], tuple(asking))

    def rule(
        self,
        base: ToolRule,
        tenant: str,
        agent: str,
        parameters: Mapping[str, Any],
        surface: str,
        requester: str,
        now: float,
        action: str = "call",
    ) -> Ruled:
        """The rule Cedar decides this call by (`base` gives what Cedar does not: redaction,
        edits, follow-ups, a handoff), the (path, says) steps, and why it was asked as unknown."""
        typed = hints(base.parameters_schema) if isinstance(base.parameters_schema, dict) else None
        v = self.verdict(tenant, agent, base.name, parameters, surface, requester, now, action, typed)
        # An equal verdict on the same rule for the same agent reads the same: the entry holds
        # the rule, so its id cannot be another object's while it is kept.
        key = (v, agent, id(base))
        entry = self._rules.get(key)
        if entry is not None and entry[0] is base:
            return entry[1]
        made = self._rule(v, base, agent)
        if len(self._rules) > _MEMO:
            self._rules.clear()
        self._rules[key] = (base, made)
        return made

    def _rule(self, v: Verdict, base: ToolRule, agent: str) -> Ruled:
        source = self.files.policies_path.name
        path = f"{source}#{'+'.join(self.files.name(p) for p in v.by)}" if v.by else source
        steps = [(source, f'Cedar decides Cosigner::Tool::"{base.name}" for Cosigner::Agent::"{agent}"')]
        steps += [
            (f"{source}#{self.files.name(p)}", f"determined the answer ({self.files.where(p)})") for p in v.by
        ]
        gate_all = base.gate_all
        common: dict[str, Any] = {"when": (), "allow_below": None, "deny_above": None, "block": path}
        if v.deny:
            reasons = [self.files.annotations.get(p, {}).get("reason") for p in v.by]
            reason = next((r for r in reasons if r), None) or f"{path} forbids this {base.name} call"
            return replace(base, **common, deny=True, deny_reason=reason), tuple(steps), None
        if v.ask is None and v.by:
            mode = ApprovalMode.ASK if gate_all else ApprovalMode.NONE
            steps.append(
                (path, "permit: nobody is asked" + (" (gate_all raises it to ask)" if gate_all else ""))
            )
            if base.handoff is not None:
                mode = ApprovalMode.HANDOFF
            taken = (("kind", path), ("deny", path))
            rule = replace(base, **common, deny=False, mode=mode, origins=base.origins + taken)
            return rule, tuple(steps), None
        if v.ask is None:
            why = v.problem or "no permit matched: asked as a tool the policy does not know (danger)"
            steps.append((source, why))
            mode = ApprovalMode.HANDOFF if base.handoff is not None else ApprovalMode.ASK_ALWAYS
            rule = replace(
                base,
                **{**common, "block": source},
                deny=False,
                kind=ToolKind.DANGER,
                mode=mode,
                approvers=(ApproverKind.REQUESTER,),
                unevaluable=v.problem is not None,
            )
            return rule, tuple(steps), v.problem
        ask = v.ask
        origins = dict(base.origins)
        for key, value in (("approvers", ask.approvers), ("quorum", ask.quorum), ("timeout", ask.timeout)):
            if value is not None:
                origins[key] = path
        origins["kind"] = path
        quorum = ask.quorum or 1
        said = f'@approval("{ask.mode.value}"): a person decides'
        steps.append((path, said))
        extra: dict[str, Any] = {"step_up": True} if ask.step_up else {}
        rule = replace(
            base,
            **common,
            **extra,
            deny=False,
            mode=ApprovalMode.HANDOFF if base.handoff is not None else ask.mode,
            approvers=ask.approvers or (ApproverKind.REQUESTER,),
            quorum=quorum,
            separate_duties=quorum > 1,
            timeout=ask.timeout if ask.timeout is not None else base.timeout,
            origins=tuple(origins.items()),
        )
        return rule, tuple(steps), None
