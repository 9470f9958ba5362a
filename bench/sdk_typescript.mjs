// What @cosigner/sdk adds to a call that needs nobody; run by bench/sdk_typescript.py.
// argv: URL KEY CALLS. Prints one JSON line.
import { Cosigner } from "../sdk/typescript/dist/src/index.js";

const [url, key, callsText] = process.argv.slice(2);
const calls = Number(callsText);
const PARAMS = { orderId: "ord_4421", amountCents: 12900 };
const SURFACE = { type: "dashboard", userId: "u_bench" };
const headers = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };

function rawRead(fetchFn, run) {
  return async (i) => {
    const r = await fetchFn(`${url}/v1/approvals`, {
      method: "POST",
      headers,
      body: JSON.stringify({ executionId: run, toolCallId: `c${i}`, toolName: "lookup_order", parameters: PARAMS, surface: SURFACE }),
    });
    const body = await r.json();
    if (r.status !== 200 || body.status !== "approved") throw new Error(JSON.stringify(body));
  };
}

function sdkRead(fetchFn, run) {
  const client = new Cosigner({ url, apiKey: key, fetch: fetchFn });
  return async (i) => {
    const d = await client.requestApproval({ executionId: run, toolCallId: `c${i}`, toolName: "lookup_order", parameters: PARAMS, surface: SURFACE });
    if (d.status !== "approved") throw new Error(d.status);
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function measure(ops, n) {
  // The two clients take turns call by call (which goes first alternates) so both see the same load.
  const wall = { raw: [], sdk: [] };
  const cpu = { raw: [], sdk: [] };
  for (let i = 0; i < n; i++) {
    const order = i % 2 ? ["raw", "sdk"] : ["sdk", "raw"];
    for (const name of order) {
      const c0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      await ops[name](i);
      const t1 = process.hrtime.bigint();
      const c1 = process.cpuUsage(c0);
      wall[name].push(Number(t1 - t0) / 1e6);
      cpu[name].push((c1.user + c1.system) / 1e3);
    }
  }
  return { wallMs: { raw: median(wall.raw), sdk: median(wall.sdk) }, cpuMs: { raw: median(cpu.raw), sdk: median(cpu.sdk) } };
}

// Canned answers: the same calls without network or server, the client's own JavaScript per call.
const canned = JSON.stringify({
  type: "approval_decided", approvalId: "apv_1", executionId: "r", toolCallId: "c", toolName: "lookup_order",
  status: "approved", decidedBy: { kind: "policy", rule: "read" }, decidedAt: "2026-12-01T00:00:00Z",
  comment: null, parametersDigest: "sha256:00", grant: null,
});
const cannedFetch = async () => new Response(canned, { status: 200, headers: { "Content-Type": "application/json" } });

async function cannedMicros(op, n) {
  let best = Infinity;
  for (let rep = 0; rep < 5; rep++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await op(i);
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e3 / n);
  }
  return best;
}

const live = { raw: rawRead(fetch, "raw_read"), sdk: sdkRead(fetch, "sdk_read") };
await measure(live, Math.min(100, calls)); // warm up connections and the JIT
const result = await measure({ raw: rawRead(fetch, "raw_read2"), sdk: sdkRead(fetch, "sdk_read2") }, calls);
const cannedRaw = await cannedMicros(rawRead(cannedFetch, "x"), 5000);
const cannedSdk = await cannedMicros(sdkRead(cannedFetch, "x"), 5000);
console.log(JSON.stringify({ node: process.version, calls, ...result, cannedMicros: { raw: cannedRaw, sdk: cannedSdk } }));
