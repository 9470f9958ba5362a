"""The MCP gateway with a lock file (`--pin`): tools are offered only as an approver approved them.

The upstream is `Shelf` (tests/sdk/mcp_shop.py), whose definitions a test changes while the
gateway runs; the agent is `mcp.Client`; Cosigner the harness app over loopback; an approver
decides through the dashboard decision route, as the tenant's app does.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from mcp import Client
from mcp.types import ToolAnnotations, ToolListChangedNotification

from cosigner import AsyncCosigner
from cosigner.mcp_gateway import Gateway, LockFileError, NewTools
from cosigner.mcp_gateway.definitions import definition_of
from cosigner.mcp_gateway.pins import LockFile
from tests.harness import until, until_async
from tests.sdk.conftest import Target
from tests.sdk.mcp_shop import ORDER, REFUND_SCHEMA, USER, Recording, Shelf, gateway
from tests.sdk.test_mcp_gateway import REFUND, Calls, approval_of, text
from tests.sdk.test_mcp_gateway_transports import failed_start

SURVEY = "Refund an order, and email the customer a survey about it."


def lock_of(path: Path) -> dict[str, Any]:
    """The lock file as JSON."""
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def files_in(folder: Path) -> list[str]:
    """The names in `folder`."""
    return sorted(p.name for p in folder.iterdir())


def digest_of(definition: dict[str, Any]) -> str:
    """The digest a definition is pinned by, computed here with the RFC 8785 library itself."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps(definition)).hexdigest()


def pinned_as_listed(shelf: Shelf, lock: Path) -> None:
    """A lock file that pins every tool of `shelf` as it is now."""
    file = LockFile.load(lock)
    for tool in shelf.tools.values():
        file.pin(definition_of(tool))


def held_of(gw: Gateway) -> dict[str, Any]:
    """The tools the gateway holds back, by name."""
    assert gw.definitions is not None
    return dict(gw.definitions.held())


async def asked(gw: Gateway, tool: str) -> str:
    """The approval a held tool's new definition is asked in, once it is asked."""
    return await until(lambda: (h := held_of(gw).get(tool)) is not None and h.approval_id, seconds=20)


async def decide(target: Target, approval_id: str, verdict: str) -> Any:
    """The approver answers on the dashboard; the pending approval as they saw it first."""
    async with AsyncCosigner(url=target.url, api_key=target.acme_approver) as dashboard:
        card = await dashboard.get(approval_id)
        await dashboard.decide(approval_id, decision=verdict, user_id=USER)  # type: ignore[arg-type]
    return card


async def test_the_first_run_offers_each_tool_once_an_approver_approves_its_definition(
    inprocess: Target, tmp_path: Path
) -> None:
    calls: Calls = []
    shelf = Shelf(calls)
    lock = tmp_path / "tools.lock.json"
    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, pin=lock) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        assert (await agent.list_tools()).tools == []  # nothing approved yet: nothing offered
        approval_id = await asked(gw, "lookup_order")
        refused = await agent.call_tool("lookup_order", {"orderId": "ord_1"})
        assert refused.is_error and approval_of(refused) == approval_id
        assert text(refused).startswith("TOOL_DEFINITION_CHANGED: ")
        assert "lookup_order is new since the lock file was written" in text(refused)
        card = await decide(inprocess, approval_id, "approve")
        await until(lock.exists)
        listed = await agent.list_tools()
        ran = await agent.call_tool("lookup_order", {"orderId": "ord_1"})
        still = await agent.call_tool("issue_refund", REFUND)  # its own approval is still open
    assert card.tool_name == "mcp.definition" and card.pending
    new = {"description": "Look up an order.", "inputSchema": ORDER, "annotations": {"readOnlyHint": True}}
    assert card.parameters == {"server": "shelf", "tool": "lookup_order", "old": None, "new": new}
    assert [t.name for t in listed.tools] == ["lookup_order"]
    assert not ran.is_error and calls == [("lookup_order", {"orderId": "ord_1"})]
    assert still.is_error and text(still).startswith("TOOL_DEFINITION_CHANGED: ")
    definition = {"name": "lookup_order", **new}
    written = {
        "tools": {"lookup_order": {"definition": definition, "digest": digest_of(definition)}},
        "version": 1,
    }
    assert lock_of(lock) == written
    assert lock.read_text() == json.dumps(written, indent=2, sort_keys=True) + "\n"
    assert files_in(tmp_path) == ["tools.lock.json"]  # no temporary file left
    assert lock.stat().st_mode & 0o777 == 0o644  # a file to commit, nothing secret in it


async def test_a_changed_description_is_refused_until_an_approver_approves_it_seen_beside_the_old(
    inprocess: Target, tmp_path: Path
) -> None:
    calls: Calls = []
    shelf = Shelf(calls)
    lock = tmp_path / "tools.lock.json"
    told: list[Any] = []

    async def notified(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            told.append(message)

    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, pin=lock, new_tools=NewTools.ALLOW) as gw,
        Client(gw.server, mode="legacy", message_handler=notified) as agent,
    ):
        assert [t.name for t in (await agent.list_tools()).tools] == ["lookup_order", "issue_refund"]
        before = lock_of(lock)["tools"]["issue_refund"]
        shelf.change("issue_refund", description=SURVEY)
        assert [t.name for t in (await agent.list_tools()).tools] == ["lookup_order"]
        refused = await agent.call_tool("issue_refund", REFUND)
        assert refused.is_error and text(refused).startswith("TOOL_DEFINITION_CHANGED: ")
        assert "the definition of issue_refund has changed since it was approved (description)" in text(
            refused
        )
        assert refused.meta is not None and refused.meta["cosigner"]["code"] == "TOOL_DEFINITION_CHANGED"
        card = await decide(inprocess, await asked(gw, "issue_refund"), "approve")
        await until(lambda: told)  # the client is told to list again
        listed = {t.name: t for t in (await agent.list_tools()).tools}
        offered = await agent.call_tool("issue_refund", REFUND)
    old, new = card.parameters["old"], card.parameters["new"]
    assert (old["description"], new["description"]) == ("Refund an order.", SURVEY)
    assert old["inputSchema"] == new["inputSchema"] == REFUND_SCHEMA
    assert listed["issue_refund"].description == SURVEY
    # Offered again, the call is the policy's again: a refund waits for a person.
    assert offered.is_error and "pending" in text(offered) and calls == []
    after = lock_of(lock)["tools"]["issue_refund"]
    assert after["definition"]["description"] == SURVEY and after["digest"] == digest_of(after["definition"])
    assert after["digest"] != before["digest"]


async def test_a_denied_definition_stays_refused_and_the_lock_file_unchanged(
    inprocess: Target, tmp_path: Path
) -> None:
    calls: Calls = []
    shelf = Shelf(calls)
    lock = tmp_path / "tools.lock.json"
    pinned_as_listed(shelf, lock)
    before = lock.read_text()
    shelf.change(
        "issue_refund", input_schema={**REFUND_SCHEMA, "properties": {"orderId": {"type": "string"}}}
    )
    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, pin=lock) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        await agent.list_tools()
        approval_id = await asked(gw, "issue_refund")
        await decide(inprocess, approval_id, "deny")
        await until(lambda: held_of(gw)["issue_refund"].standing == "refused")
        refused = await agent.call_tool("issue_refund", REFUND)
        listed = [t.name for t in (await agent.list_tools()).tools]
    assert f"approval {approval_id} of the new definition was denied by {USER}, so it is not offered" in text(
        refused
    )
    assert "(inputSchema)" in text(refused) and text(refused).startswith("TOOL_DEFINITION_CHANGED: ")
    assert listed == ["lookup_order"] and calls == [] and lock.read_text() == before


@pytest.mark.parametrize("new_tools", [NewTools.ALLOW, NewTools.DENY])
async def test_a_new_tool_is_pinned_or_refused_as_new_tools_says_and_nobody_is_asked(
    inprocess: Target, tmp_path: Path, new_tools: NewTools
) -> None:
    calls: Calls = []
    shelf = Shelf(calls)
    lock = tmp_path / "tools.lock.json"
    pinned_as_listed(shelf, lock)
    shelf.change("refund_fee", description="Refund a fee.")
    sent = Recording()
    async with (
        gateway(
            inprocess.url, inprocess.acme, shelf.server, pin=lock, new_tools=new_tools, transport=sent
        ) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        listed = [t.name for t in (await agent.list_tools()).tools]
        called = await agent.call_tool("refund_fee", {"orderId": "ord_1"})
        held = held_of(gw)
    if new_tools is NewTools.ALLOW:
        assert listed == ["lookup_order", "issue_refund", "refund_fee"] and held == {}
        assert "refund_fee" in lock_of(lock)["tools"]
        assert "pending" in text(called)  # a tool the policy does not name: a person decides the call
        assert sent.sent == ["POST /v1/approvals"]  # the call's, not a definition's
    else:
        assert listed == ["lookup_order", "issue_refund"] and "refund_fee" not in lock_of(lock)["tools"]
        assert text(called).startswith("TOOL_DEFINITION_CHANGED: refund_fee is new since the lock file")
        assert "--new-tools deny" in text(called)
        assert sent.sent == []  # nobody asked, about the definition or the call
    assert calls == []


@pytest.mark.parametrize("pinned", [True, False])
async def test_annotations_never_let_a_call_through(inprocess: Target, tmp_path: Path, pinned: bool) -> None:
    calls: Calls = []
    shelf = Shelf(calls)
    harmless = ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )
    shelf.change("wipe_disk", description="Wipe a disk.", annotations=harmless)
    options: dict[str, Any] = (
        {"pin": tmp_path / "tools.lock.json", "new_tools": NewTools.ALLOW} if pinned else {}
    )
    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, **options) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        listed = {t.name: t for t in (await agent.list_tools()).tools}
        result = await agent.call_tool("wipe_disk", {"orderId": "sda"})
    assert listed["wipe_disk"].annotations == harmless
    # The policy does not name wipe_disk: danger, a person decides, whatever the server claims.
    assert result.is_error and "pending" in text(result) and calls == []


async def test_a_change_of_annotations_alone_is_a_changed_definition(
    inprocess: Target, tmp_path: Path
) -> None:
    calls: Calls = []
    shelf = Shelf(calls)
    lock = tmp_path / "tools.lock.json"
    pinned_as_listed(shelf, lock)
    shelf.change("issue_refund", annotations=ToolAnnotations(read_only_hint=True))
    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, pin=lock) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        listed = [t.name for t in (await agent.list_tools()).tools]
        card = await decide(inprocess, await asked(gw, "issue_refund"), "deny")
        refused = await agent.call_tool("issue_refund", REFUND)
    assert listed == ["lookup_order"] and "(annotations)" in text(refused) and calls == []
    assert "annotations" not in card.parameters["old"]
    assert card.parameters["new"]["annotations"] == {"readOnlyHint": True}


async def test_a_restarted_gateway_finds_the_same_open_approval(inprocess: Target, tmp_path: Path) -> None:
    shelf = Shelf([])
    lock = tmp_path / "tools.lock.json"
    pinned_as_listed(shelf, lock)
    changed = "Refund an order, and say sorry."  # a change no other test asks about (same ids)
    shelf.change("issue_refund", description=changed)
    found = []
    for _ in range(2):
        async with (
            gateway(inprocess.url, inprocess.acme, shelf.server, pin=lock) as gw,
            Client(gw.server, mode="legacy") as agent,
        ):
            await agent.list_tools()
            found.append(await asked(gw, "issue_refund"))
    assert found[0] == found[1]  # one card for one change, however often the gateway starts
    await decide(inprocess, found[0], "approve")
    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, pin=lock) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        await agent.list_tools()
        await until(lambda: lock_of(lock)["tools"]["issue_refund"]["definition"]["description"] == changed)
        listed = [t.name for t in (await agent.list_tools()).tools]
    assert listed == ["lookup_order", "issue_refund"]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "is not JSON"),
        (b'{"tools": {}, "tools": {}, "version": 1}', 'the key "tools" appears twice'),
        (b'{"tools": {}, "version": 2}', "is version 2 of the lock file; this gateway reads version 1"),
        (b'{"tools": []}', 'is not a lock file (an object of "tools" and "version")'),
        (
            b'{"tools": {"a": {"definition": {"name": "b"}, "digest": "sha256:00"}}, "version": 1}',
            "whose name is",
        ),
        (
            b'{"tools": {"a": {"definition": {"name": "a"}, "digest": "sha256:'
            + b"0" * 64
            + b'"}}, "version": 1}',
            "is not the digest of its definition (was the entry edited by hand?)",
        ),
    ],
)
def test_a_malformed_lock_file_is_refused_naming_the_fix(tmp_path: Path, content: bytes, says: str) -> None:
    lock = tmp_path / "tools.lock.json"
    lock.write_bytes(content)
    with pytest.raises(LockFileError, match=f"^--pin {lock}") as refused:
        LockFile.load(lock)
    assert says in str(refused.value)
    assert lock.read_bytes() == content  # read, never rewritten


def test_the_command_refuses_a_malformed_lock_file_before_the_upstream_starts(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    lock = tmp_path / "tools.lock.json"
    lock.write_text('{"tools": {}}')
    upstream = f"python3 -c \"open({str(starts)!r}, 'a').write('x')\""
    stderr = failed_start("--upstream-cmd", upstream, "--surface", "dashboard:u_1", "--pin", str(lock))
    assert stderr.splitlines()[-1].startswith(f"error: --pin {lock} is not a lock file")
    assert not starts.exists()
    stderr = failed_start("--upstream-cmd", upstream, "--surface", "dashboard:u_1", "--new-tools", "allow")
    assert stderr.splitlines()[-1] == (
        "error: --new-tools needs --pin FILE: without a lock file every tool is offered as the "
        "upstream lists it"
    )


async def test_a_definition_approval_that_expired_is_asked_afresh_by_a_restarted_gateway(
    inprocess: Target, tmp_path: Path
) -> None:
    shelf = Shelf([])
    lock = tmp_path / "tools.lock.json"
    pinned_as_listed(shelf, lock)
    shelf.change("issue_refund", description="Refund an order, then wait.")
    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, pin=lock) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        await agent.list_tools()
        first = await asked(gw, "issue_refund")
        inprocess.expire(first)
        await until(lambda: held_of(gw)["issue_refund"].standing == "refused")
        refused = await agent.call_tool("issue_refund", REFUND)
    assert f"approval {first} of the new definition expired" in text(refused)
    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, pin=lock) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        await agent.list_tools()
        second = await asked(gw, "issue_refund")
    assert second != first
    assert await status(inprocess, second) == "pending"


async def status(target: Target, approval_id: str) -> str:
    async with AsyncCosigner(url=target.url, api_key=target.acme) as c:
        return (await c.get(approval_id)).status.value


async def test_a_definition_changed_between_listings_is_held_once_calls_see_it(
    inprocess: Target, tmp_path: Path
) -> None:
    calls: Calls = []
    shelf = Shelf(calls)
    lock = tmp_path / "tools.lock.json"
    pinned_as_listed(shelf, lock)
    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, pin=lock, relist_seconds=0) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        await agent.list_tools()  # the client lists once, as desktop clients do
        shelf.change("lookup_order", description="Look up an order, and its customer's card.")
        # A call after the change has the gateway list the upstream again, without the client.
        await agent.call_tool("lookup_order", {"orderId": "ord_1"})
        await until(lambda: "lookup_order" in held_of(gw))
        refused = await agent.call_tool("lookup_order", {"orderId": "ord_2"})
    assert "has changed since it was approved (description)" in text(refused)
    assert ("lookup_order", {"orderId": "ord_2"}) not in calls


async def test_two_tools_of_one_name_are_neither_offered(inprocess: Target, tmp_path: Path) -> None:
    calls: Calls = []
    shelf = Shelf(calls)
    lock = tmp_path / "tools.lock.json"
    pinned_as_listed(shelf, lock)
    shelf.twins = [
        shelf.tools["lookup_order"].model_copy(update={"description": "Look up an order, the other way."})
    ]
    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, pin=lock) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        listed = [t.name for t in (await agent.list_tools()).tools]
        refused = await agent.call_tool("lookup_order", {"orderId": "ord_1"})
        held = held_of(gw)
    assert listed == ["issue_refund"] and calls == []
    assert text(refused) == (
        "TOOL_DEFINITION_CHANGED: lookup_order cannot be offered: the upstream lists more than one tool of "
        "this name, so it is not offered or run. The tool was not called."
    )
    assert held["lookup_order"].approval_id is None  # nobody is asked to pick one


async def test_a_definition_changed_again_withdraws_the_open_approval(
    inprocess: Target, tmp_path: Path
) -> None:
    shelf = Shelf([])
    lock = tmp_path / "tools.lock.json"
    pinned_as_listed(shelf, lock)
    lock.chmod(0o640)
    shelf.change("issue_refund", description="Refund an order, once.")
    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, pin=lock) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        await agent.list_tools()
        first = await asked(gw, "issue_refund")
        shelf.change("issue_refund", description="Refund an order, twice.")
        await agent.list_tools()
        second = await until(
            lambda: (h := held_of(gw)["issue_refund"]).approval_id != first and h.approval_id
        )
        await until_async(lambda: is_status(inprocess, first, "cancelled"))
        card = await decide(inprocess, second, "approve")
        await until(lambda: "issue_refund" not in held_of(gw))
    assert card.parameters["new"]["description"] == "Refund an order, twice."
    assert lock_of(lock)["tools"]["issue_refund"]["definition"]["description"] == "Refund an order, twice."
    assert lock.stat().st_mode & 0o777 == 0o640  # the operator's mode kept


async def is_status(target: Target, approval_id: str, expected: str) -> bool:
    return await status(target, approval_id) == expected
