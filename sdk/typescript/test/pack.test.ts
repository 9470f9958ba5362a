// `npm pack` makes a tarball that installs into an empty project and works there.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startCosigner, type Server } from "./server.js";

const PACKAGE = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";

let server: Server;
let project: string;
before(async () => {
  server = await startCosigner();
  project = mkdtempSync(join(tmpdir(), "cosigner-pack-"));
});
after(async () => {
  await server?.stop();
  if (project) rmSync(project, { recursive: true, force: true });
});

const SCRIPT = `
import { Cosigner, parametersDigest, ApprovalModeUnsupported, KeyScopeError } from "@cosigner/sdk";
import { cosignerTools } from "@cosigner/sdk/ai";
const cosigner = new Cosigner();
const decision = await cosigner.requestApproval({
  executionId: "run_pack", toolCallId: "call_1", toolName: "lookup_order",
  parameters: { orderId: "ord_1" }, surface: { type: "api" },
});
const claims = await cosigner.verifyGrant(decision.grant, { orderId: "ord_1" });
let refused = "";
try {
  await cosigner.admit("run_pack_2", { type: "api" }, ["issue_refund"]);
} catch (exc) {
  refused = exc instanceof ApprovalModeUnsupported ? exc.code : String(exc);
}
console.log(JSON.stringify({
  status: decision.status, tool: claims.toolName, digest: parametersDigest({ b: 1, a: "é" }),
  refused, scope: new KeyScopeError("x").code, adapter: typeof cosignerTools,
}));
`;

test("the packed tarball installs into an empty project and works there", () => {
  // The build is current: `npm test` built it before running the tests.
  execFileSync(NPM, ["pack", "--ignore-scripts", "--pack-destination", project], { cwd: PACKAGE, stdio: "pipe" });
  const tarball = readdirSync(project).find((f) => f.endsWith(".tgz"));
  assert.ok(tarball, "npm pack wrote no tarball");
  const listed = execFileSync("tar", ["-tzf", join(project, tarball)], { encoding: "utf8" });
  for (const file of ["package/dist/src/index.js", "package/dist/src/index.d.ts", "package/dist/src/ai.d.ts", "package/dist/src/openai-agents.d.ts", "package/README.md"]) {
    assert.ok(listed.includes(file), `${file} is missing from the tarball`);
  }
  assert.ok(!listed.includes("package/dist/test/"), "the tests are not shipped");
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "empty", private: true, type: "module" }));
  execFileSync(NPM, ["install", "--prefer-offline", "--no-audit", "--no-fund", `./${tarball}`], { cwd: project, stdio: "pipe" });
  writeFileSync(join(project, "main.js"), SCRIPT);
  const out = execFileSync(process.execPath, ["main.js"], {
    cwd: project,
    encoding: "utf8",
    env: { ...process.env, COSIGNER_URL: server.url, COSIGNER_API_KEY: server.agentKey },
  });
  assert.deepEqual(JSON.parse(out), {
    status: "approved",
    tool: "lookup_order",
    digest: "sha256:aa58fba8483623bed37c1b02edfccbdd9a53123837c20bfa4cb4049993a2872e",
    refused: "APPROVAL_MODE_UNSUPPORTED",
    scope: "KEY_SCOPE",
    adapter: "function",
  });
});
