"""A coding agent's session replayed against a Cosigner app on a stepped clock, counting the
interruptions a person gets: bench/fatigue.py prints the figures, tests/bench/test_fatigue.py
asserts them.

The session is a list of calls, each at its minute: reads (Bash `ls`, `cat`, `git status`,
`git diff`, Read on files), small edits of one tool (Edit inside the project) and dangerous
commands (`git push`, `rm -rf`, `git reset --hard`, `npm publish`). The agent retries some
calls while they are pending (the same arguments, a new `toolCallId`). The person answers
through the Slack emulator, with really signed button presses on the cards Cosigner posted:
Approve, Deny, or "Allow for 1h" on the first edit's card where the card offers it. Nothing
is written to the database by hand.

Counted: cards posted (each one a person must answer), calls run (approved) and who allowed
each (a rule of the policy, a person's press on that call's own card, or a standing allow a
person granted by a press); a call approved any other way is counted as run unallowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from surfaces.slack.emulated_methods import Recorded
from surfaces.slack.emulator import SlackEmulator
from tests.harness import Harness, cosigner_app, until, until_async

SECRET = "fatigue-signing-secret"
APP_ID = "A0COSIGNER"
TEAM = "T0DEMO"
CHANNEL = "C1"
REQUESTER = "U1"
ADMIN = "U0ADMIN"
PROJECT = "/home/dev/shop"
MINUTES = 45
NOT_NOW = {"comment": {"comment": {"type": "plain_text_input", "value": "Not from an agent"}}}

BASELINE = f"""
[defaults]
timeout = "10m"
max_gated_calls_per_execution = 100

[tenants.demo]
slack_team = "{TEAM}"
admin_channel = "C0ADMINS"
admins = {{ slack = ["{ADMIN}"], dashboard = ["u_admin"] }}
"""
"""Today's default: no section for these tools, so each is `danger` and every call is asked."""


class Kind(Enum):
    """What a call of the session is."""

    READ = "read"
    WRITE = "write"
    DANGER = "danger"


@dataclass(frozen=True)
class Step:
    """One gated call: its tool and arguments, whether the person would deny it, and how many
    identical retries the agent sends while it is pending."""

    kind: Kind
    tool: str
    parameters: dict[str, Any]
    deny: bool = False
    retries: int = 0


READS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("Bash", {"command": "git status"}),
    ("Bash", {"command": "ls src/cart"}),
    ("Read", {"file_path": f"{PROJECT}/src/cart/totals.py"}),
    ("Bash", {"command": "git diff"}),
    ("Bash", {"command": "cat pyproject.toml"}),
    ("Read", {"file_path": f"{PROJECT}/tests/test_totals.py"}),
    ("Bash", {"command": "git diff --stat src/cart"}),
    ("Bash", {"command": "ls -la tests"}),
    ("Read", {"file_path": f"{PROJECT}/src/cart/discounts.py", "offset": 40, "limit": 80}),
    ("Bash", {"command": "git log --oneline -5"}),
    ("Bash", {"command": "grep -n apply_discount src/cart/discounts.py"}),
    ("Read", {"file_path": "/etc/hosts"}),  # outside the project: asked under the sample policy
)
WRITES = tuple(
    {"file_path": f"{PROJECT}/src/cart/{name}.py", "old_string": f"old_{i}", "new_string": f"new_{i}"}
    for i, name in enumerate(("totals", "discounts", "totals", "tax", "totals") * 3)
)
DANGERS: tuple[Step, ...] = (
    Step(Kind.DANGER, "Bash", {"command": "rm -rf build/"}, deny=True),
    Step(Kind.DANGER, "Bash", {"command": "git reset --hard HEAD~3"}, deny=True),
    Step(Kind.DANGER, "Bash", {"command": "git push origin fix/discounts"}, retries=2),
    Step(Kind.DANGER, "Bash", {"command": "git push --force origin main"}, deny=True, retries=1),
    Step(Kind.DANGER, "Bash", {"command": "npm publish"}),
)


def session(reads: int = 40, writes: int = 15) -> list[Step]:
    """The session: `reads` reads cycling through READS with varying arguments, `writes` edits
    and the five dangerous calls, interleaved as an agent works (read, edit, read, …)."""
    read_steps = []
    for i in range(reads):
        tool, params = READS[i % len(READS)]
        if i >= len(READS) and "command" in params:
            params = {**params, "description": f"look {i}"}  # the same command, other arguments
        elif i >= len(READS):
            params = {**params, "limit": 100 + i}
        read_steps.append(Step(Kind.READ, tool, params))
    write_steps = [
        Step(Kind.WRITE, "Edit", p, retries=1 if i == 0 else 0) for i, p in enumerate(WRITES[:writes])
    ]
    steps: list[Step] = []
    pending = [read_steps, write_steps, list(DANGERS)]
    sizes = [len(p) for p in pending]
    total = sum(sizes)
    # Spread each kind evenly over the session: step n takes the kind furthest behind its share.
    for n in range(total):
        done = [0, 0, 0]
        for s in steps:
            done[[Kind.READ, Kind.WRITE, Kind.DANGER].index(s.kind)] += 1
        behind = [(n + 1) * sizes[k] / total - done[k] if pending[k] else -1.0 for k in range(3)]
        k = behind.index(max(behind))
        steps.append(pending[k].pop(0))
    return steps


@dataclass
class Tally:
    """What one replay counted."""

    calls: int = 0
    requests: int = 0  # calls and their retries
    interruptions: int = 0  # cards posted: each one waits for a person's answer
    coalesced: int = 0
    asked: dict[Kind, int] = field(default_factory=lambda: {k: 0 for k in Kind})
    run: int = 0
    run_unallowed: int = 0
    refused_by_rule: int = 0
    denied_by_person: int = 0
    by: dict[str, int] = field(default_factory=dict)  # who allowed each call run
    dangerous_asked_alone: int = 0
    dangerous: int = 0

    def count(self, who: str) -> None:
        self.by[who] = self.by.get(who, 0) + 1


def cards(emu: SlackEmulator) -> list[Recorded]:
    """The messages posted with buttons: each one a question to a person."""
    return [
        m
        for m in emu.messages
        if m.method == "chat.postMessage" and any(b.get("type") == "actions" for b in m.blocks)
    ]


def _body(n: int, step: Step, retry: int = 0) -> dict[str, Any]:
    return {
        "executionId": "run_1",
        "toolCallId": f"toolu_{n:02d}" + (f"_retry{retry}" if retry else ""),
        "toolName": step.tool,
        "parameters": step.parameters,
        "surface": {"type": "slack", "teamId": TEAM, "channelId": CHANNEL, "userId": REQUESTER},
    }


class Replay:
    """One session against one started app and its Slack emulator."""

    def __init__(self, h: Harness, emu: SlackEmulator, key: str, *, allow_for: bool) -> None:
        self.h, self.emu, self.key = h, emu, key
        self.allow_for = allow_for  # the person answers "Allow for 1h" on the first edit offering it
        self.pressed: set[str] = set()  # approval ids a person answered on their own card
        self.granted: set[str] = set()  # standing allows a person granted by a press
        self.tally = Tally()

    async def run(self, steps: list[Step]) -> Tally:
        gap = MINUTES * 60 / len(steps)
        for n, step in enumerate(steps):
            await self.call(n, step)
            self.h.advance(gap)
        return self.tally

    async def call(self, n: int, step: Step) -> None:
        t = self.tally
        t.calls += 1
        t.requests += 1
        t.dangerous += step.kind is Kind.DANGER
        before = len(cards(self.emu))
        r = await self.h.client.post("/v1/approvals", json=_body(n, step), headers=self.h.auth(self.key))
        if r.status_code == 403:
            assert r.json()["error"]["code"] == "PERMISSION_DENIED", r.text
            t.refused_by_rule += 1
            return
        assert r.status_code in (200, 201), r.text
        answer = r.json()
        if r.status_code == 201:
            answer = await self.ask(n, step, answer, before)
        self.settle(step, answer)

    async def ask(self, n: int, step: Step, created: dict[str, Any], before: int) -> dict[str, Any]:
        """A pending call: the card it posted, the agent's retries, the person's press."""
        t = self.tally
        aid = str(created["approvalId"])
        card = (await until(lambda: cards(self.emu)[before:]))[0]
        assert aid in str(card.blocks), "the card names the call it asks about"
        t.asked[step.kind] += 1
        await until_async(lambda: self._receipt(aid))  # a press before the receipt is refused
        for retry in range(1, step.retries + 1):
            again = await self.h.client.post(
                "/v1/approvals", json=_body(n, step, retry), headers=self.h.auth(self.key)
            )
            assert again.status_code == 201 and again.json().get("coalesced") is True, again.text
            assert again.json()["approvalId"] == aid
            t.requests += 1
            t.coalesced += 1
        user = ADMIN if card.channel == "C0ADMINS" else REQUESTER
        actions = [e["action_id"] for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
        if step.deny:
            action = "cosigner.deny"
        elif self.allow_for and step.kind is Kind.WRITE and "cosigner.allow_for.1h" in actions:
            action = "cosigner.allow_for.1h"
        else:
            action = "cosigner.approve"
        pressed = await self.emu.click(
            self.h.client, channel=card.channel, ts=card.ts, action_id=action, secret=SECRET, user=user
        )
        assert pressed.status_code == 200, pressed.text
        if action == "cosigner.deny":  # Deny opens a modal for a comment; submitting it denies
            views = len(self.emu.views)
            await until(lambda: len(self.emu.views) > views)
            submitted = await self.emu.submit_view(self.h.client, secret=SECRET, values=NOT_NOW, user=user)
            assert submitted.status_code == 200, submitted.text
        self.pressed.add(aid)
        decided = await until_async(lambda: self._decided(aid))
        if action == "cosigner.allow_for.1h":
            r = await self.h.client.get("/v1/allowances", headers=self.h.auth(self.h.approver_key("demo")))
            self.granted |= {a["allowanceId"] for a in r.json()["allowances"] if a["approvalId"] == aid}
        if step.kind is Kind.DANGER and len(cards(self.emu)) == before + 1:
            t.dangerous_asked_alone += 1  # its own card, and no other call on it
        return decided

    def settle(self, step: Step, answer: dict[str, Any]) -> None:
        """Count how the call ended and, if it ran, who allowed it."""
        t = self.tally
        by = answer.get("decidedBy") or {}
        if answer["status"] != "approved":
            t.denied_by_person += by.get("kind") == "person"
            return
        t.run += 1
        aid = str(answer["approvalId"])
        if by.get("kind") == "policy":
            t.count("a rule")
        elif by.get("kind") == "person" and aid in self.pressed:
            t.count("a person, on its card")
        elif by.get("kind") == "allowance" and by.get("allowanceId") in self.granted:
            assert step.kind is not Kind.DANGER, "a dangerous call is never covered by a standing allow"
            t.count("a standing allow a person granted")
        else:
            t.run_unallowed += 1

    async def _receipt(self, aid: str) -> bool:
        placed = await self.h.desk.placed(aid)
        return placed is not None and placed.delivered is not None

    async def _decided(self, aid: str) -> dict[str, Any] | None:
        r = await self.h.client.get(f"/v1/approvals/{aid}", headers=self.h.auth(self.key))
        body: dict[str, Any] = r.json()
        return body if body["status"] != "pending" else None


async def replay(policy: str, steps: list[Step], *, allow_for: bool, database_kind: str = "sqlite") -> Tally:
    """Replay `steps` under `policy` (TOML) in a fresh app, its own Slack emulator and database."""
    from contracts.ports import ApprovalDesk
    from surfaces.slack import SlackAdapter, SlackConfig

    async with SlackEmulator.running(team_id=TEAM, app_id=APP_ID) as emu:
        config = SlackConfig(signing_secret=SECRET, bot_token="xoxb-demo", api_url=emu.api_url, app_id=APP_ID)

        def factory(desk: ApprovalDesk) -> SlackAdapter:
            return SlackAdapter(config, desk)

        async with cosigner_app(policy, surfaces=[factory], database_kind=database_kind) as h:
            key = await h.create_tenant("demo")
            tally = await Replay(h, emu, key, allow_for=allow_for).run(steps)
            tally.interruptions = len(cards(emu))
            return tally
