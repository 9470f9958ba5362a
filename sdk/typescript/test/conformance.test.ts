// sdk/conformance.json, written by the Python SDK's side, holds here exactly as there.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  canonicalJson,
  GrantRefused,
  InvalidSignature,
  ParametersMismatch,
  parametersDigest,
  parseDecision,
  verifyGrant,
  webhooks,
  withOriginal,
} from "../src/index.js";

interface Vectors {
  digests: { name: string; input: string; canonical: string; digest: string }[];
  numbers: { ieee754: string; canonical: string }[];
  grants: {
    jwks: unknown;
    cases: {
      name: string;
      token: string;
      parameters: unknown;
      toolName: string;
      toolCallId: string;
      checkAt: number;
      ok: boolean;
      refusal?: string;
      approvers?: { by: string; surface: string }[];
      audience?: string;
      seen?: string[];
      jti?: string;
      aud?: string;
    }[];
  };
  edits: {
    name: string;
    asked: Record<string, unknown>;
    decision: unknown;
    ok: boolean;
    run?: Record<string, unknown>;
  }[];
  decisions: { name: string; body: unknown; quorum: number; approvers: string[] }[];
  webhooks: {
    secret: string;
    cases: {
      name: string;
      id: string;
      timestamp: number;
      body: string;
      signature: string;
      checkAt: number;
      ok: boolean;
    }[];
  };
}

const FILE = fileURLToPath(new URL("../../../conformance.json", import.meta.url));
const vectors = JSON.parse(readFileSync(FILE, "utf8")) as Vectors;

test("the file has every kind of vector", () => {
  assert.ok(vectors.digests.length >= 20);
  assert.ok(vectors.numbers.length >= 20);
  assert.ok(vectors.grants.cases.some((c) => c.ok) && vectors.grants.cases.some((c) => !c.ok));
  assert.ok(vectors.webhooks.cases.some((c) => c.ok) && vectors.webhooks.cases.some((c) => !c.ok));
});

for (const vector of vectors.digests) {
  test(`digest: ${vector.name}`, () => {
    const value: unknown = JSON.parse(vector.input);
    assert.equal(canonicalJson(value), vector.canonical);
    assert.equal(parametersDigest(value), vector.digest);
  });
}

for (const vector of vectors.numbers) {
  test(`number ${vector.ieee754}`, () => {
    const view = new DataView(new ArrayBuffer(8));
    view.setBigUint64(0, BigInt(`0x${vector.ieee754}`));
    assert.equal(canonicalJson(view.getFloat64(0)), vector.canonical);
  });
}

for (const vector of vectors.grants.cases) {
  test(`grant: ${vector.name}`, async () => {
    const check = verifyGrant(vector.token, vectors.grants.jwks, {
      toolName: vector.toolName,
      toolCallId: vector.toolCallId,
      parameters: vector.parameters,
      now: vector.checkAt,
      ...(vector.audience === undefined ? {} : { audience: vector.audience }),
      ...(vector.seen === undefined ? {} : { seen: new Set(vector.seen) }),
    });
    if (vector.ok) {
      const claims = await check;
      assert.equal(claims.digest, parametersDigest(vector.parameters));
      assert.deepEqual(claims.approvers, vector.approvers);
      assert.equal(claims.grantId, vector.jti);
      assert.equal(claims.audience, vector.aud);
    } else {
      await assert.rejects(check, (exc: unknown) => {
        assert.ok(exc instanceof GrantRefused, String(exc));
        assert.match(exc.message, new RegExp(vector.refusal ?? ""));
        return true;
      });
    }
  });
}

for (const vector of vectors.decisions) {
  test(`decision: ${vector.name}`, () => {
    const decision = parseDecision(vector.body);
    assert.equal(decision.quorum ?? 1, vector.quorum);
    assert.deepEqual(
      (decision.approvals ?? []).map((a) => a.by),
      vector.approvers,
    );
  });
}

for (const vector of vectors.webhooks.cases) {
  test(`webhook: ${vector.name}`, (t) => {
    t.mock.timers.enable({ apis: ["Date"], now: vector.checkAt * 1000 });
    const headers = {
      "webhook-id": vector.id,
      "webhook-timestamp": String(vector.timestamp),
      "webhook-signature": vector.signature,
    };
    if (vector.ok) {
      assert.deepEqual(webhooks.verify(vector.body, headers, vectors.webhooks.secret), JSON.parse(vector.body));
    } else {
      assert.throws(() => webhooks.verify(vector.body, headers, vectors.webhooks.secret), InvalidSignature);
    }
  });
}

test("a webhook without its headers is refused, naming the header", () => {
  assert.throws(() => webhooks.verify("{}", {}, vectors.webhooks.secret), /no webhook-id header/);

});

for (const vector of vectors.edits) {
  test(`edited call: ${vector.name}`, () => {
    const decision = parseDecision(vector.decision);
    if (vector.ok) {
      assert.deepEqual(withOriginal(decision, vector.asked), vector.run);
    } else {
      assert.throws(() => withOriginal(decision, vector.asked), ParametersMismatch);
    }
  });
}
