// A real Cosigner for the tests: `python -m bot.cli serve` on a free port, a fresh SQLite
// file, a policy, and a tenant made by `cosigner tenants create`.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Cosigner, type Surface } from "../src/index.js";

const PACKAGE = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const REPO = resolve(PACKAGE, "../..");
/** The Python that runs Cosigner: COSIGNER_PYTHON, else the repository's .venv (as `./run` makes it). */
export const PYTHON = process.env.COSIGNER_PYTHON ?? resolve(PACKAGE, "../../.venv/bin/python");

export const POLICY = `
[defaults]
timeout = "5m"

[tools.lookup_order]
kind = "read"

[tools.issue_refund]
kind = "danger"
`;

/** The person who triggers runs and answers them in the tenant's own app. */
export const USER = "u_1";
export const SURFACE: Surface = { type: "dashboard", userId: USER };
export const HEADLESS: Surface = { type: "api" };

export interface Server {
  url: string;
  agentKey: string;
  /** The key that may decide: the approver key when `tenants create` prints one, else the agent key. */
  approverKey: string;
  client(): Cosigner;
  /** A client that decides as the approver. */
  approver(): Cosigner;
  stop(): Promise<void>;
}

/** A port nothing listens on now. */
export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const probe = createServer();
    probe.once("error", fail);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => done(typeof address === "object" && address ? address.port : 0));
    });
  });
}

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(COSIGNER_|SLACK_|TWILIO_)/.test(k)) env[k] = v;
  }
  return { ...env, PYTHONUNBUFFERED: "1", ...extra };
}

/** The keys `cosigner tenants create` printed: its agent key, and its approver key if it prints one. */
export function keysOf(output: string): { agent: string; approver: string } {
  const agent = /API key[^:]*:\s*(\S+)/.exec(output)?.[1] ?? /agent[^:\n]*key[^:\n]*:\s*(\S+)/i.exec(output)?.[1];
  if (!agent) throw new Error(`no key in the output of tenants create:\n${output}`);
  const approver = /approver[^:\n]*key[^:\n]*:\s*(\S+)/i.exec(output)?.[1];
  return { agent, approver: approver ?? agent };
}

/** Start Cosigner with `policy`; stop it with `stop()`. */
export async function startCosigner(policy = POLICY): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), "cosigner-ts-"));
  writeFileSync(join(dir, "policy.toml"), policy);
  const env = cleanEnv({
    COSIGNER_DATABASE_URL: `sqlite+aiosqlite:///${join(dir, "c.db")}`,
    COSIGNER_POLICY: join(dir, "policy.toml"),
    COSIGNER_SECRET: "typescript-sdk-tests-secret-of-at-least-32-bytes",
  });
  const created = spawnSync(PYTHON, ["-m", "bot.cli", "tenants", "create", "acme"], { cwd: REPO, env, encoding: "utf8" });
  if (created.status !== 0) {
    throw new Error(`cosigner tenants create failed (is COSIGNER_PYTHON=${PYTHON} right?):\n${created.stderr}${created.error ?? ""}`);
  }
  const keys = keysOf(created.stdout);
  const port = await freePort();
  const log = join(dir, "serve.log");
  const proc: ChildProcess = spawn(PYTHON, ["-m", "bot.cli", "serve", "--port", String(port)], {
    cwd: REPO,
    env,
    stdio: ["ignore", "ignore", openSync(log, "w")],
  });
  const url = `http://127.0.0.1:${port}`;
  const started = Date.now();
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`cosigner serve exited:\n${readFileSync(log, "utf8")}`);
    try {
      if ((await fetch(`${url}/readyz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() - started > 30_000) {
      proc.kill("SIGKILL");
      throw new Error(`cosigner serve did not come up in 30 s:\n${readFileSync(log, "utf8")}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    agentKey: keys.agent,
    approverKey: keys.approver,
    client: () => new Cosigner({ url, apiKey: keys.agent }),
    approver: () => new Cosigner({ url, apiKey: keys.approver }),
    stop: async () => {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGKILL");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The id of the approval the agent's client (made with `noting`) created for this run and tool. */
export async function pendingApproval(server: Server, executionId: string, toolName: string): Promise<string> {
  return waitFor(() => seen.get(`${executionId}/${toolName}`));
}

const seen = new Map<string, string>();

/** A `fetch` for the agent's client that notes each approval it creates, so a test can answer it. */
export const noting: typeof fetch = async (input, init) => {
  const response = await fetch(input, init);
  if (String(input).endsWith("/v1/approvals") && init?.method === "POST" && response.status === 201) {
    const body = (await response.clone().json()) as { approvalId: string; executionId: string; toolName: string };
    seen.set(`${body.executionId}/${body.toolName}`, body.approvalId);
  }
  return response;
};

async function waitFor<T>(probe: () => T | undefined, ms = 20_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() - started > ms) throw new Error("nothing to answer: the agent never asked Cosigner");
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The `result` events' data of an approval's audit trail. */
export async function resultsOf(server: Server, approvalId: string): Promise<Record<string, unknown>[]> {
  return (await server.client().audit(approvalId)).filter((e) => e.event === "result").map((e) => e.data);
}

/** A fresh execution id. */
export function runId(): string {
  return `run_${Math.random().toString(36).slice(2, 10)}`;
}
