// The README's first gated call, as written: installed from the packed tarball, type-checked
// against the package's declarations, and run against `cosigner dev` (what `./run dev`
// starts), where Alice presses Approve on its card in the sandbox page.
import assert from "node:assert/strict";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { PYTHON, freePort } from "./server.js";

const PACKAGE = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const REPO = resolve(PACKAGE, "../..");
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";
const TSC = join(PACKAGE, "node_modules", "typescript", "bin", "tsc");

/** The first ```js block after the heading `heading` in the README. */
function readmeCode(heading: string): string {
  const text = readFileSync(join(PACKAGE, "README.md"), "utf8");
  const section = text.slice(text.indexOf(heading));
  const found = /```js\n([\s\S]*?)```/.exec(section);
  assert.ok(found?.[1], `no js block under ${heading}`);
  return found[1];
}

let project: string;
let data: string;
let dev: ChildProcess | undefined;
let url = "";
let key = "";

/** `cosigner dev` on a free port: its URL and key, from the export line its banner prints. */
async function startDev(): Promise<void> {
  data = mkdtempSync(join(tmpdir(), "cosigner-dev-"));
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(COSIGNER_|SLACK_|TWILIO_)/.test(k)) env[k] = v;
  const port = await freePort();
  const proc = spawn(PYTHON, ["-m", "bot.cli", "dev", "--port", String(port), "--data", join(data, "d")], {
    cwd: REPO,
    env: { ...env, PYTHONUNBUFFERED: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  dev = proc;
  let out = "";
  let err = "";
  proc.stderr?.on("data", (chunk) => (err += chunk));
  await new Promise<void>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`cosigner dev printed no banner in 60 s:\n${out}\n${err}`)), 60_000);
    proc.stdout?.on("data", (chunk) => {
      out += chunk;
      const line = /export COSIGNER_URL=(\S+) COSIGNER_API_KEY=(\S+)/.exec(out);
      if (line?.[1] && line[2]) {
        url = line[1];
        key = line[2];
        clearTimeout(timer);
        done();
      }
    });
    proc.once("exit", () => fail(new Error(`cosigner dev exited:\n${out}\n${err}`)));
  });
}

before(async () => {
  project = mkdtempSync(join(tmpdir(), "cosigner-readme-"));
  await startDev();
});
after(async () => {
  if (dev && dev.exitCode === null) {
    const exited = new Promise((r) => dev?.once("exit", r));
    dev.kill("SIGINT");
    await exited;
  }
  for (const dir of [project, data]) if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Message {
  channel: string;
  ts: string;
  edited: boolean;
  blocks: { type: string; text?: { text: string }; elements?: { value?: string }[] }[];
}

async function sandboxState(): Promise<{ messages: Message[] }> {
  return (await fetch(`${url}/sandbox/api/state`)).json() as Promise<{ messages: Message[] }>;
}

/** Press Approve as Alice on the sandbox's `issue_refund` card until the approval is decided
 * (a press before Cosigner has the card's delivery on record is refused, as in Slack). */
async function approveAsAlice(): Promise<void> {
  const started = Date.now();
  while (Date.now() - started < 60_000) {
    const card = (await sandboxState()).messages.find((m) => m.blocks[0]?.text?.text === "issue_refund" && !m.edited);
    if (card) {
      const approval = String(card.blocks.find((b) => b.type === "actions")?.elements?.[0]?.value).split("|")[0];
      await fetch(`${url}/sandbox/api/click`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ channel: card.channel, ts: card.ts, actionId: "cosigner.approve", as: "requester" }),
      });
      const now = await fetch(`${url}/v1/approvals/${approval}`, { headers: { Authorization: `Bearer ${key}` } });
      if (((await now.json()) as { status: string }).status !== "pending") return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("the README's request never reached a card Alice could approve");
}

test("the README's example installs from the tarball, type-checks and runs against cosigner dev", async () => {
  execFileSync(NPM, ["pack", "--ignore-scripts", "--pack-destination", project], { cwd: PACKAGE, stdio: "pipe" });
  const tarball = readdirSync(project).find((f) => f.endsWith(".tgz"));
  assert.ok(tarball, "npm pack wrote no tarball");
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "my-agent", private: true, type: "module" }));
  execFileSync(NPM, ["install", "--prefer-offline", "--no-audit", "--no-fund", `./${tarball}`], { cwd: project, stdio: "pipe" });
  const code = readmeCode("## A first gated call");
  writeFileSync(join(project, "refund.mjs"), code);
  // Checked against the installed package's declarations, as an editor would.
  execFileSync(
    process.execPath,
    [TSC, "--noEmit", "--allowJs", "--checkJs", "--strict", "--module", "nodenext", "--target", "es2022", "--skipLibCheck", "refund.mjs"],
    { cwd: project, encoding: "utf8" },
  );

  const run = spawn(process.execPath, ["refund.mjs"], {
    cwd: project,
    env: { ...process.env, COSIGNER_URL: url, COSIGNER_API_KEY: key },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  run.stdout?.on("data", (chunk) => (out += chunk));
  run.stderr?.on("data", (chunk) => (err += chunk));
  const exited = new Promise<number | null>((r) => run.once("exit", r));
  await approveAsAlice();
  assert.equal(await exited, 0, err);
  assert.equal(out.trim(), "refunded 12900 cents on ord_4421");
});
