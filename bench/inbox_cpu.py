"""Server CPU per approve round trip answered in the inbox, beside the same round trip
answered through the decision endpoint, against a real `cosigner serve` process.

    .venv/bin/python bench/inbox_cpu.py [--db sqlite|postgres] [--trips 200] [--rounds 3]

Set-up (all on loopback): the Slack emulator runs in this process and plays the OpenID
Connect issuer ("Sign in with Slack", verified by authlib in the server as in production);
`cosigner serve` runs as its own process pinned to one core (`roundtrip.running_server`,
as the other benchmarks), with a fresh database, COSIGNER_OIDC_* pointing at the emulator
and a policy whose tenant `bench` lists the signed-in person as a `dashboard` approver.
This process signs one browser session in (httpx, cookies kept) before timing.

Each trip: the agent creates a dashboard request for that person; the person answers it
(the inbox: `GET /inbox/` for the CSRF token, then the form's `POST …/answer`; the API:
`POST …/decision` with the approver key); the agent reads the decision with its grant.
The figure is the server process's CPU (user + system, from /proc) per trip, so the
difference between the two paths is what the inbox costs the server.

A third path is a step-up answer (`step_up = true` on the tool): the step-up page, the
challenge (`…/step-up/options`), and the passkey's assertion posted back, which the server
checks (py_webauthn: the P-256 signature, user verification, the counter) before the
Approve; the passkey is a software one (`passkey_device.py`), registered once through
`/inbox/passkeys` before timing. Exit status 0 when every trip was approved with a grant
(with `amr` for step-up) and the server logged no error.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import sys
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import roundtrip as rt
from passkey_device import Device

from surfaces.slack.emulator import SlackEmulator

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
CLIENT_ID, CLIENT_SECRET = "bench-inbox", "bench-inbox-secret"
PERSON, EMAIL = "U0BENCH", "ada@bench.example"
STEP_UP_TOOL = "wire_funds"
DIGEST = re.compile(r'name="digest" value="([^"]+)"')
POLICY = (
    rt.POLICY
    + f"""
[tools.{STEP_UP_TOOL}]
kind = "danger"
approvers = ["requester"]
step_up = true

[tenants.bench]
admins = {{ dashboard = ["{EMAIL}"] }}
"""
)


async def sign_in(browser: httpx.AsyncClient, emu: SlackEmulator) -> None:
    """Sign `browser` in through the emulated issuer, as a person choosing themselves would."""
    start = await browser.get("/inbox/login")
    if start.status_code != 302:
        raise rt.Failure(f"sign-in did not start: HTTP {start.status_code} {start.text[:200]}")
    authorize = start.headers["location"]
    args = dict(parse_qsl(urlsplit(authorize).query))
    async with httpx.AsyncClient() as issuer:
        chosen = await issuer.post(authorize.split("?")[0], data={**args, "user": PERSON})
    back = urlsplit(chosen.headers["location"])
    done = await browser.get(f"{back.path}?{back.query}")
    if done.status_code != 303:
        raise rt.Failure(f"sign-in refused: HTTP {done.status_code} {done.text[:200]}")


async def enrol(browser: httpx.AsyncClient, device: Device) -> None:
    """Register the software passkey through the inbox, as the passkeys page's script does."""
    token = csrf(await browser.get("/inbox/passkeys"))
    options = await browser.post("/inbox/passkeys/options", data={"csrf": token})
    if options.status_code != 200:
        raise rt.Failure(f"passkey options: HTTP {options.status_code} {options.text[:200]}")
    body = {"csrf": token, "name": "Bench key", "credential": device.created(options.json())}
    added = await browser.post("/inbox/passkeys", json=body)
    if added.status_code != 200:
        raise rt.Failure(f"passkey not added: HTTP {added.status_code} {added.text[:200]}")


def csrf(page: httpx.Response) -> str:
    token = CSRF.search(page.text)
    if token is None:
        raise rt.Failure("the inbox page has no CSRF token: signed out?")
    return token.group(1)


async def step_up(browser: httpx.AsyncClient, device: Device, aid: str) -> None:
    """Confirm the Approve with the passkey, as the step-up page's script does."""
    page = await browser.get(f"/inbox/approvals/{aid}/step-up")
    token, digest = csrf(page), DIGEST.search(page.text)
    if digest is None:
        raise rt.Failure(f"no step-up form: {page.text[:200]}")
    base = f"/inbox/approvals/{aid}/step-up"
    options = await browser.post(f"{base}/options", data={"csrf": token, "digest": digest.group(1)})
    if options.status_code != 200:
        raise rt.Failure(f"step-up options: HTTP {options.status_code} {options.text[:200]}")
    done = await browser.post(base, json={"csrf": token, "credential": device.asserted(options.json())})
    if done.status_code != 200:
        raise rt.Failure(f"step-up: HTTP {done.status_code} {done.text[:200]}")


async def trip(
    server: rt.Server,
    api: httpx.AsyncClient,
    browser: httpx.AsyncClient,
    call: str,
    inbox: bool,
    device: Device | None = None,
) -> None:
    agent = {"Authorization": f"Bearer {server.key}"}
    body = {
        "executionId": f"run_{call}",
        "toolCallId": call,
        "toolName": STEP_UP_TOOL if device is not None else rt.TOOL,
        "parameters": {"orderId": "ord_1", "amountCents": 12900, "cardToken": "tok_x"},
        "surface": {"type": "dashboard", "userId": EMAIL},
    }
    r = await api.post("/v1/approvals", json=body, headers=agent)
    if r.status_code != 201:
        raise rt.Failure(f"create: HTTP {r.status_code} {r.text[:200]}")
    aid = r.json()["approvalId"]
    if device is not None:
        await step_up(browser, device, aid)
    elif inbox:
        page = (await browser.get("/inbox/")).text
        token = CSRF.search(page)
        if token is None:
            raise rt.Failure("the inbox page has no CSRF token: signed out?")
        answered = await browser.post(
            f"/inbox/approvals/{aid}/answer", data={"decision": "approve", "csrf": token.group(1)}
        )
        if answered.status_code != 303:
            raise rt.Failure(f"inbox answer: HTTP {answered.status_code} {answered.text[:200]}")
    else:
        decision = {"decision": "approve", "userId": EMAIL}
        answered = await api.post(
            f"/v1/approvals/{aid}/decision",
            json=decision,
            headers={"Authorization": f"Bearer {server.approver}"},
        )
        if answered.status_code != 200:
            raise rt.Failure(f"decision: HTTP {answered.status_code} {answered.text[:200]}")
    done = (await api.get(f"/v1/approvals/{aid}?wait=5", headers=agent)).json()
    if done.get("status") != "approved" or not done.get("grant"):
        raise rt.Failure(f"not approved with a grant: {done}")
    if device is not None:
        claims = json.loads(base64.urlsafe_b64decode(done["grant"].split(".")[1] + "=="))
        if claims.get("amr") != ["webauthn"]:
            raise rt.Failure(f"a step-up grant without amr: {claims}")


async def main_async(args: argparse.Namespace) -> int:
    cores = rt.pick_cores()
    async with SlackEmulator.running(team_id="T0BENCH") as emu:
        emu.openid.register_client(CLIENT_ID, CLIENT_SECRET)
        emu.openid.add_person(PERSON, "Ada Bench", EMAIL)
        env = {
            "COSIGNER_OIDC_ISSUER": emu.openid.issuer,
            "COSIGNER_OIDC_CLIENT_ID": CLIENT_ID,
            "COSIGNER_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        }
        async with (
            rt.running_server(
                args.db, args.pg_admin, cores[0], "WARNING", policy_text=POLICY, extra_env=env
            ) as server,
            httpx.AsyncClient(base_url=server.url, timeout=30) as api,
            httpx.AsyncClient(base_url=server.url, timeout=30) as browser,
        ):
            await sign_in(browser, emu)
            device = Device(server.url)
            await enrol(browser, device)
            paths: dict[str, tuple[bool, Device | None]] = {
                "decision endpoint  ": (False, None),
                "inbox (page + form)": (True, None),
                "step-up (passkey)  ": (True, device),
            }
            print(
                f"Inbox answer path: server pid {server.pid} on core {cores[0]}; "
                f"{args.db}; {args.trips} trips"
            )
            seq = 0
            for inbox, key in paths.values():  # warm-up, not reported
                for _ in range(20):
                    seq += 1
                    await trip(server, api, browser, f"w{seq}", inbox, key)
            for r in range(args.rounds):
                for label, (inbox, key) in paths.items():
                    latencies: list[float] = []
                    cpu0 = rt.cpu_seconds(server.pid)
                    for _ in range(args.trips):
                        seq += 1
                        started = time.perf_counter()
                        await trip(server, api, browser, f"t{seq}", inbox, key)
                        latencies.append(time.perf_counter() - started)
                    ms = (rt.cpu_seconds(server.pid) - cpu0) * 1000 / args.trips
                    print(
                        f"round {r + 1}  {label}  "
                        f"{ms:.2f} ms server CPU per round trip, "
                        f"p50 {rt.percentile(latencies, 50) * 1000:.1f} ms wall"
                    )
            problems = server.stderr_problems()
            if problems:
                print(f"server error lines: {len(problems)}")
    return 0 if not problems else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--pg-admin", default=rt.DEFAULT_PG_ADMIN)
    parser.add_argument("--trips", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        return asyncio.run(main_async(args))
    finally:
        rt._stop_all()


if __name__ == "__main__":
    sys.exit(main())
