"""Smoke-test a built Cosigner image with buildah: migrate, serve, one approval round trip.

Run by deploy/image/ci.sh (root, `BUILDAH_ISOLATION=chroot`) after the build:

    python3 deploy/image/smoke.py localhost/cosigner:ci [--postgres postgresql://postgres@127.0.0.1:5432/postgres]

For SQLite (a host folder mounted as a volume) and, with `--postgres`, on a fresh database
created there and dropped afterwards: `cosigner migrate` and `cosigner tenants create` run
in the image, `cosigner serve` runs in the image on loopback (buildah runs it on the host's
network), and this script, from the host, waits for `/readyz` 200, asks for an approval,
answers it with the approver key while a long-poll waits, and checks the long-poll gets the
decision. It also checks that the image runs as a non-root user, has no compiler, writes
nothing outside its volume, and that everything `serve` prints on stderr is a JSON line.
Standard library only, so it runs with any Python 3.11 on the host.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

UID = 10001  # the image's user (Containerfile)
VOLUME = "/smoke"  # not the image's own VOLUME (/data): buildah 1.28 may mount that over a -v
POLICY = """
[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
"""
# The lines buildah itself prints when the command it runs ends other than with status 0.
BUILDAH_LINE = re.compile(r"^(subprocess exited (on \w+|with status \d+)|Error: exit status \d+)$")
# Paths buildah itself creates in a container to run a command (mount points and the files
# it binds in); anything else written outside the volumes would be Cosigner's.
RUNTIME_PATHS = ("/dev", "/proc", "/sys", "/run", "/etc/hosts", "/etc/resolv.conf", "/etc/hostname", VOLUME)


def say(line: str) -> None:
    """One progress line, flushed, so CI's log shows where it is."""
    print(f"smoke: {line}", flush=True)


def buildah(*args: str, timeout: float = 120) -> str:
    """Run buildah to completion; its stdout, or an exception naming its stderr."""
    done = subprocess.run(["buildah", *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"buildah {' '.join(args[:3])} … exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def run_args(ctr: str, env: dict[str, str], volume: Path) -> list[str]:
    """`buildah run` with the environment and the volume, on the host's network."""
    args = ["run", "--network", "host", "-v", f"{volume}:{VOLUME}"]
    for key, value in env.items():
        args += ["--env", f"{key}={value}"]
    return [*args, ctr, "--"]


def cosigner(ctr: str, env: dict[str, str], volume: Path, *command: str) -> str:
    """One `cosigner` command in the image; its stdout."""
    return buildah(*run_args(ctr, env, volume), "cosigner", *command)


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(
    method: str, url: str, key: str | None = None, body: Any = None, timeout: float = 10
) -> tuple[int, Any]:
    """One HTTP request; the status and the JSON body (or the text, for /metrics)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    text = raw.decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


@contextmanager
def serving(ctr: str, env: dict[str, str], volume: Path, port: int, log: Path) -> Iterator[str]:
    """`cosigner serve` in the image on loopback until the block ends; yields its base URL."""
    with log.open("w") as err:
        proc = subprocess.Popen(
            [
                "buildah",
                *run_args(ctr, env, volume),
                "cosigner",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=err,
            stderr=err,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"serve exited {proc.returncode} while starting:\n{log.read_text()}")
            try:
                status, body = http("GET", f"{base}/readyz", timeout=2)
                if status == 200:
                    say(f"/readyz 200 {json.dumps(body)}")
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"serve did not answer /readyz 200 within 90 s:\n{log.read_text()}")
            time.sleep(0.5)
        yield base
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    # buildah answers a SIGTERM by killing its command, so the server itself is asked to stop,
    # as a container engine would ask it: SIGTERM, then it must exit 0 within the grace period.
    for pid in descendants(proc.pid):
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if Path(argv[0].decode()).name.startswith("python") and b"serve" in argv:
            os.kill(pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise RuntimeError(f"serve did not stop within 30 s of SIGTERM:\n{log.read_text()}") from None
    # uvicorn shuts down, then ends by the signal it was sent (as `kill` expects). buildah
    # reports its command's end in lines of its own after the server's, worded differently
    # from run to run ("subprocess exited on terminated", "… with status 1"): set aside.
    lines = log.read_text().splitlines()
    while lines and BUILDAH_LINE.match(lines[-1]):
        lines.pop()
    log.write_text("\n".join(lines) + "\n")


def descendants(root: int) -> list[int]:
    """The processes below `root`, from /proc."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        parents[int(stat.parent.name)] = int(fields[1])
    found, todo = [], [root]
    while todo:
        parent = todo.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        todo += children
    return found


def round_trip(base: str, agent: str, approver: str) -> None:
    """Create → long-poll → decide: the long-poll returns the approved decision with a grant."""
    status, created = http(
        "POST",
        f"{base}/v1/approvals",
        agent,
        {
            "executionId": "smoke_run",
            "toolCallId": "call_1",
            "toolName": "issue_refund",
            "parameters": {"orderId": "ord_1", "amountCents": 1200},
            "surface": {"type": "dashboard", "userId": "u_smoke"},
            "timeoutSeconds": 120,
        },
    )
    assert status == 201 and created["status"] == "pending", (status, created)
    approval = created["approvalId"]
    waited: dict[str, Any] = {}

    def wait() -> None:
        waited["answer"] = http("GET", f"{base}/v1/approvals/{approval}?wait=60", agent, timeout=70)

    poll = threading.Thread(target=wait)
    poll.start()
    # Answer once the long-poll waits on the server (its gauge), so it is woken by the decision.
    deadline = time.monotonic() + 30
    while "cosigner_waiters 1.0" not in http("GET", f"{base}/metrics")[1]:
        assert time.monotonic() < deadline, "the long-poll never reached the server"
        time.sleep(0.05)
    status, decided = http(
        "POST",
        f"{base}/v1/approvals/{approval}/decision",
        approver,
        {"decision": "approve", "userId": "u_smoke", "comment": "smoke"},
    )
    assert status == 200 and decided["status"] == "approved", (status, decided)
    poll.join(75)
    assert not poll.is_alive(), "the long-poll did not return"
    status, answer = waited["answer"]
    assert status == 200 and answer["status"] == "approved" and answer["grant"], (status, answer)
    say(f"round trip: {approval} created, long-poll answered approved by {answer['decidedBy']['userId']}")


def serve_checks(ctr: str, env: dict[str, str], volume: Path, log: Path) -> None:
    """Tenant keys from the image, then serve and one round trip; stderr all JSON lines."""
    printed = cosigner(ctr, env, volume, "tenants", "create", "smoke")
    keys = dict(re.findall(r"^(agent|approver) key \(.*\): (\S+)$", printed, re.M))
    assert set(keys) == {"agent", "approver"}, printed
    with serving(ctr, env, volume, free_port(), log) as base:
        assert http("GET", f"{base}/healthz")[0] == 200
        round_trip(base, keys["agent"], keys["approver"])
        status, metrics = http("GET", f"{base}/metrics")
        assert status == 200 and 'route="create"' in metrics, status
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    not_json = [line for line in lines if not line.startswith("{")]
    assert lines and not not_json, f"serve printed lines that are not JSON: {not_json}"
    assert any(json.loads(line).get("msg") == "cosigner started" for line in lines), lines


def written_outside_volumes(ctr: str) -> list[str] | None:
    """Paths the container's processes added or changed outside the volumes (overlay only)."""
    merged = Path(buildah("mount", ctr).strip())
    try:
        upper = merged.parent / "diff"
        if merged.name != "merged" or not upper.is_dir():
            return None  # not overlay: nothing to compare against
        found = []
        for path in sorted(upper.rglob("*")):
            inside = "/" + str(path.relative_to(upper))
            if path.is_dir() and any(p.startswith(inside + "/") for p in RUNTIME_PATHS):
                continue  # a parent of a mount point
            if not any(inside == p or inside.startswith(p + "/") for p in RUNTIME_PATHS):
                found.append(inside)
        return found
    finally:
        buildah("umount", ctr)


def psql(url: str, sql: str) -> None:
    """Run one statement with psql on the host's PostgreSQL."""
    subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql], check=True, timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("image")
    parser.add_argument(
        "--postgres", help="also test on a fresh database of this server: a libpq URL whose user may CREATEDB"
    )
    args = parser.parse_args()
    ctr = buildah("from", "--pull=never", args.image).strip()
    work = Path(tempfile.mkdtemp(prefix="cosigner-smoke-"))
    try:
        user = buildah("run", ctr, "--", "id", "-u").strip()
        assert user == str(UID), f"the image runs as uid {user}, not {UID}"
        found = buildah(
            "run",
            ctr,
            "--",
            "sh",
            "-c",
            "for c in cc gcc g++ c++ clang make ld; do command -v $c; done; true",
        ).split()
        assert not found, f"the image has build tools: {found}"
        say(f"runs as uid {user}; no compiler, linker or make")
        env = {"COSIGNER_SECRET": secrets.token_urlsafe(32), "COSIGNER_POLICY": f"{VOLUME}/policy.toml"}
        databases: list[tuple[str, str, str | None]] = [
            ("sqlite", f"sqlite+aiosqlite:///{VOLUME}/cosigner.db", None)
        ]
        if args.postgres:
            name = f"cosigner_image_smoke_{os.getpid()}"
            server = urllib.parse.urlsplit(args.postgres).netloc
            databases.append(("postgresql", f"postgresql+asyncpg://{server}/{name}", name))
        for kind, url, pg_name in databases:
            volume = work / kind
            volume.mkdir()
            (volume / "policy.toml").write_text(POLICY)
            shutil.chown(volume, UID, UID)
            volume.chmod(0o700)
            if pg_name:
                psql(args.postgres, f"CREATE DATABASE {pg_name}")
            try:
                db_env = {**env, "COSIGNER_DATABASE_URL": url}
                say(f"{kind}: {cosigner(ctr, db_env, volume, 'migrate').strip()}")
                serve_checks(ctr, db_env, volume, work / f"serve-{kind}.log")
            finally:
                if pg_name:
                    psql(args.postgres, f"DROP DATABASE IF EXISTS {pg_name} WITH (FORCE)")
            if kind == "sqlite":
                files = sorted(p.name for p in volume.iterdir())
                assert "cosigner.db" in files, files
                say(f"sqlite: the volume holds {', '.join(files)}")
        outside = written_outside_volumes(ctr)
        if outside is None:
            say("not on overlay storage: the check for writes outside the volume is skipped")
        else:
            assert not outside, f"written outside the volume: {outside}"
            say("nothing was written outside the volume (a read-only root filesystem works)")
        return 0
    finally:
        buildah("rm", ctr)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
