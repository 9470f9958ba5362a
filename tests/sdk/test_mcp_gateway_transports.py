"""The MCP gateway over real transports: a stdio upstream that dies, an upstream over
Streamable HTTP, the gateway served over Streamable HTTP (one execution per session) and
over stdio as the `cosigner-mcp-gateway` command.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from mcp import Client, StdioServerParameters

from cosigner import AsyncCosigner
from tests.harness import until
from tests.processes import free_port
from tests.sdk.conftest import Target, results_of
from tests.sdk.mcp_shop import gateway, shop
from tests.sdk.test_mcp_gateway import REFUND, Calls, approval_of, decide, text

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


def upstream_process() -> StdioServerParameters:
    """The crash test's upstream, a real subprocess speaking MCP over stdio."""
    return StdioServerParameters(command=sys.executable, args=[str(HERE / "mcp_upstream.py")])


async def test_an_upstream_that_dies_answers_an_error_result_and_the_audit_says_so(inprocess: Target) -> None:
    async with (
        gateway(inprocess.url, inprocess.acme, upstream_process()) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        approval_id = approval_of(await agent.call_tool("issue_refund", REFUND))
        alive = await agent.call_tool("lookup_order", {"orderId": "ord_1"})
        pid = int(text(alive).rsplit(" ", 1)[1])
        os.kill(pid, signal.SIGKILL)
        await decide(inprocess, approval_id, "approve")
        crashed = await agent.call_tool("issue_refund", REFUND)
        read = await agent.call_tool("lookup_order", {"orderId": "ord_1"})
    assert crashed.is_error and "upstream MCP server failed on issue_refund" in text(crashed)
    assert read.is_error and "upstream MCP server failed on lookup_order" in text(read)
    async with AsyncCosigner(url=inprocess.url, api_key=inprocess.acme) as c:
        (reported,) = results_of(await c.audit(approval_id))
    assert reported.get("error")


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn on a free loopback port; yields its MCP URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    await until(lambda: server.started or task.done())
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await task


async def test_over_streamable_http_each_session_is_one_execution(inprocess: Target) -> None:
    calls: Calls = []
    upstream = shop(calls)
    async with (
        serving(upstream.streamable_http_app()) as upstream_url,
        gateway(inprocess.url, inprocess.acme, upstream_url) as gw,
        serving(gw.server.streamable_http_app()) as url,
    ):
        async with Client(url, mode="legacy") as alice, Client(url, mode="legacy") as bob:
            a1 = approval_of(await alice.call_tool("issue_refund", REFUND))
            a2 = approval_of(await alice.call_tool("issue_refund", REFUND))
            b1 = approval_of(await bob.call_tool("issue_refund", REFUND))
            assert a1 == a2 != b1  # the same call in another session is another call
            await decide(inprocess, a1, "approve")
            done = await alice.call_tool("issue_refund", REFUND)
            still = await bob.call_tool("issue_refund", REFUND)
            read = await bob.call_tool("lookup_order", {"orderId": "ord_2"})
    assert text(done) == "refunded 12900 on ord_1" and still.is_error and approval_of(still) == b1
    assert text(read) == "order ord_2: delivered"
    assert calls == [("issue_refund", REFUND), ("lookup_order", {"orderId": "ord_2"})]
    async with AsyncCosigner(url=inprocess.url, api_key=inprocess.acme) as c:
        runs = {(await c.get(a)).execution_id for a in (a1, b1)}
    assert len(runs) == 2 and all(r.startswith("mcp-") for r in runs)


async def test_a_stateless_http_client_resumes_its_call_through_the_sealed_round_state(
    inprocess: Target,
) -> None:
    calls: Calls = []
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls), rounds=100_000) as gw,
        serving(gw.server.streamable_http_app()) as url,
        Client(url, input_required_max_rounds=100_000) as agent,
    ):
        assert agent.protocol_version == "2026-07-28"
        waiting = asyncio.create_task(agent.call_tool("issue_refund", REFUND))
        (approval_id,) = await until(gw.ledger.pending_approvals)
        await decide(inprocess, approval_id, "approve")
        result = await waiting
    assert text(result) == "refunded 12900 on ord_1" and calls == [("issue_refund", REFUND)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])  # the handshake, and 2026-07-28's envelopes
async def test_the_gateway_command_serves_stdio_in_front_of_the_example_server(
    inprocess: Target, mode: str
) -> None:
    command = StdioServerParameters(
        command=str(Path(sys.executable).parent / "cosigner"),
        args=[
            "mcp-gateway",
            "--upstream-cmd",
            f"{sys.executable} {ROOT / 'examples' / 'mcp_server.py'}",
            "--surface",
            "dashboard:u_1",
            "--hold",
            "0",
        ],
        env={"COSIGNER_URL": inprocess.url, "COSIGNER_API_KEY": inprocess.acme},
    )
    async with Client(command, mode=mode) as agent:
        tools = [t.name for t in (await agent.list_tools()).tools]
        first = await agent.call_tool("lookup_order", {"order_id": "ord_2"})  # asked by the handler
        read = await agent.call_tool("lookup_order", {"order_id": "ord_3"})  # asked as it was read
        args = {"order_id": "ord_3", "amount_cents": 500}
        asked = await agent.call_tool("issue_refund", args)
        await decide(inprocess, approval_of(asked), "approve")
        done = await agent.call_tool("issue_refund", args)
    assert tools == ["lookup_order", "issue_refund", "send_email"] and not first.is_error
    assert not read.is_error and read.structured_content == {
        "orderId": "ord_3",
        "status": "delivered",
        "totalCents": 12900,
    }
    assert asked.is_error and "pending" in text(asked)
    assert not done.is_error and text(done) == "refunded 500 cents on ord_3"


INITIALIZE = (
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    '"capabilities":{},"clientInfo":{"name":"script","version":"1"}}}\n'
)


@pytest.mark.parametrize("stdin", ["file", "devnull"])
def test_the_gateway_command_takes_files_and_dev_null_as_its_standard_streams(
    inprocess: Target, stdin: str, tmp_path: Path
) -> None:
    # The event loop cannot watch a regular file or /dev/null: these are read and written
    # in a thread instead of ending the command with a traceback.
    source = tmp_path / "session.jsonl"
    source.write_text(INITIALIZE)
    answers = tmp_path / "answers.jsonl"
    with (source if stdin == "file" else Path(os.devnull)).open("rb") as given, answers.open("wb") as out:
        done = subprocess.run(
            [
                str(Path(sys.executable).parent / "cosigner-mcp-gateway"),
                "--upstream-cmd",
                f"{sys.executable} {ROOT / 'examples' / 'mcp_server.py'}",
                "--surface",
                "dashboard:u_1",
            ],
            stdin=given,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COSIGNER_URL": inprocess.url, "COSIGNER_API_KEY": inprocess.acme},
            timeout=60,
        )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    upstream = f"{sys.executable} {ROOT / 'examples' / 'mcp_server.py'}"
    started = f"cosigner-mcp-gateway: upstream {upstream}, Cosigner at {inprocess.url}, serving MCP on stdio"
    assert started in done.stderr.splitlines(), done.stderr  # the line, on stderr: stdout is MCP's
    lines = [json.loads(line) for line in answers.read_text().splitlines()]
    if stdin == "file":
        assert lines[0]["id"] == 1 and lines[0]["result"]["serverInfo"]["name"], lines
    else:
        assert lines == []


def failed_start(*args: str) -> str:
    """Run the gateway command, which must refuse to start with exit status 2 and no
    traceback; its stderr."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "cosigner-mcp-gateway"), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, "COSIGNER_URL": "http://127.0.0.1:9", "COSIGNER_API_KEY": "csk_x"},
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


@pytest.mark.parametrize("upstream", ["exits", "missing", "unreachable"])
def test_an_upstream_that_cannot_be_connected_is_one_error_line_and_exit_2(
    upstream: str, tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    exits = (
        f"{sys.executable} -c \"import sys; open({str(starts)!r}, 'a').write('x'); "
        "print('upstream: no config', file=sys.stderr); sys.exit(3)\""
    )
    given = {
        "exits": ["--upstream-cmd", exits],
        "missing": ["--upstream-cmd", str(tmp_path / "no-such-server")],
        "unreachable": ["--upstream-url", f"http://127.0.0.1:{free_port()}/mcp"],
    }[upstream]
    stderr = failed_start(*given, "--surface", "dashboard:u_1")
    last = stderr.splitlines()[-1]
    assert last.startswith(f"error: could not start or reach the upstream MCP server ({given[0]} "), last
    if upstream == "exits":
        assert "upstream: no config" in stderr  # its own words, before the gateway's
        assert "hung up before the handshake ended" in last
        assert starts.read_text() == "x", "a server that hung up was started again"
    elif upstream == "missing":
        assert "No such file or directory" in last
    else:
        assert "connection" in last.lower()


@pytest.mark.parametrize("port", ["taken", "99999"])
def test_a_port_it_cannot_listen_on_is_one_error_line_before_the_upstream_starts(
    port: str, tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    upstream = f"{sys.executable} -c \"open({str(starts)!r}, 'a').write('x')\""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        given = str(holder.getsockname()[1]) if port == "taken" else port
        stderr = failed_start(
            *("--upstream-cmd", upstream, "--surface", "dashboard:u_1"),
            *("--transport", "http", "--port", given),
        )
    last = stderr.splitlines()[-1]
    if port == "taken":
        assert (
            last == f"error: port {given} is already in use; stop what holds it or pick another with --port N"
        )
    else:
        assert last.endswith("argument --port: '99999' is not a port; give a number from 0 to 65535"), last
    assert not starts.exists(), "the upstream was started for a gateway that cannot listen"


def test_a_malformed_surface_is_one_error_line_naming_the_fix() -> None:
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "cosigner-mcp-gateway"),
            "--upstream-cmd",
            "x",
            "--surface",
            "sms:555",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: --surface 'sms:555' is not a valid sms surface")
    assert "sms:+15550100200" in result.stderr


async def test_the_gateway_command_over_http_says_where_it_listens_once_it_serves(inprocess: Target) -> None:
    upstream = f"{sys.executable} {ROOT / 'examples' / 'mcp_server.py'}"
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "cosigner-mcp-gateway"),
        *("--upstream-cmd", upstream, "--surface", "dashboard:u_1", "--transport", "http", "--port", "0"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COSIGNER_URL": inprocess.url + "?token=x", "COSIGNER_API_KEY": inprocess.acme},
    )
    try:
        assert process.stderr is not None
        line = (await asyncio.wait_for(process.stderr.readline(), timeout=60)).decode().rstrip("\n")
        prefix = f"cosigner-mcp-gateway: upstream {upstream}, Cosigner at {inprocess.url}, listening on "
        assert line.startswith(prefix + "http://127.0.0.1:") and line.endswith("/mcp"), line
        # Already listening when it says so: with the gateway stopped right after the line,
        # a connection still lands in its backlog instead of being refused.
        process.send_signal(signal.SIGSTOP)
        try:
            port = int(line.rsplit(":", 1)[1].removesuffix("/mcp"))
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        finally:
            process.send_signal(signal.SIGCONT)
        async with Client(line.removeprefix(prefix)) as agent:  # the address it names is the one it serves
            tools = [t.name for t in (await agent.list_tools()).tools]
        assert tools == ["lookup_order", "issue_refund", "send_email"]
    finally:
        process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.wait(), timeout=60)
