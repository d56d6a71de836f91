/**
 * Authentication against nodes started with --auth: basic credentials and
 * API tokens as the Go SDK sends them, and TLS with client certificates.
 */

import { create } from "@bufbuild/protobuf";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Client, HermesError, UnauthenticatedError, UnavailableError } from "../src/index.js";
import { CreateTokenRequestSchema, CreateTokenResponseSchema } from "../src/gen/hermes/v1/hermes_pb.js";
import { HermesNode, hermesBin, passwordFile, topicName } from "./hermes-node.js";

const USER = "admin";
const PASSWORD = "adminpass1";
let node: HermesNode;

before(async () => {
  node = await HermesNode.start((dir) => [
    "--auth",
    "--superusers", USER,
    "--bootstrap-user", USER,
    "--bootstrap-password-file", passwordFile(dir, PASSWORD),
  ]);
});

after(async () => {
  await node?.stop();
});

/** Connects as the bootstrap user, waiting until the node has created it. */
async function connectAdmin(): Promise<Client> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const c = await Client.connect(node.grpcAddr, { credentials: { username: USER, password: PASSWORD } });
    try {
      const me = await c.whoAmI();
      if (me.principal === USER) return c;
    } catch (e) {
      if (!(e instanceof UnauthenticatedError) || Date.now() > deadline) throw e;
    }
    await c.close();
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("without credentials or with a wrong password: UnauthenticatedError", async () => {
  const anon = await Client.connect(node.grpcAddr);
  await assert.rejects(anon.listTopics(), (e: unknown) => e instanceof UnauthenticatedError && !e.retriable);
  await anon.close();
  const wrong = await Client.connect(node.grpcAddr, { credentials: { username: USER, password: "wrong-password" } });
  await assert.rejects(wrong.createTopic(topicName("nope")), UnauthenticatedError);
  await assert.rejects(wrong.producer(topicName("nope")), UnauthenticatedError);
  await wrong.close();
});

test("a user with a password produces and consumes in a group", async () => {
  const c = await connectAdmin();
  const me = await c.whoAmI();
  assert.equal(me.authRequired, true);
  assert.equal(me.via, "password");
  const name = topicName("auth");
  await c.createTopic(name, { partitions: 2 });
  const producer = await c.producer(name);
  await Promise.all(Array.from({ length: 10 }, (_, i) => producer.send({ key: `k${i}`, payload: `v${i}` })));
  await producer.close();
  const consumer = await c.subscribe(name, { group: "auth-group", from: "earliest" });
  const got = new Set<string>();
  for await (const m of consumer) {
    got.add(m.payload.toString());
    if (got.size === 10) break;
  }
  await consumer.close();
  assert.equal((await c.describeGroup("auth-group")).partitions.reduce((n, p) => n + p.committedOffset, 0n), 10n);
  await c.close();
});

test("an API token authenticates as its principal", async () => {
  const admin = await connectAdmin();
  const resp = await admin.call(
    "CreateToken",
    CreateTokenRequestSchema,
    CreateTokenResponseSchema,
    create(CreateTokenRequestSchema, { description: "typescript sdk test" }),
  );
  await admin.close();
  assert.notEqual(resp.token, "");
  const c = await Client.connect(node.grpcAddr, { token: resp.token });
  const me = await c.whoAmI();
  assert.equal(me.principal, USER);
  assert.equal(me.via, "token");
  await c.close();
  const bad = await Client.connect(node.grpcAddr, { token: "not-a-token" });
  await assert.rejects(bad.health().then(() => bad.listTopics()), (e: unknown) => e instanceof HermesError && e instanceof UnauthenticatedError);
  await bad.close();
});

test("TLS with a client certificate: the certificate is the principal", async () => {
  const certs = join(node.dir, "certs");
  execFileSync(hermesBin(), ["dev-certs", "--dir", certs, "--clients", "alice"]);
  const tlsNode = await HermesNode.start(
    () => [
      "--auth",
      "--superusers", "alice",
      "--tls-cert", join(certs, "node-1.crt"),
      "--tls-key", join(certs, "node-1.key"),
      "--tls-client-ca", join(certs, "ca.crt"),
    ],
    join(certs, "ca.crt"),
  );
  try {
    const c = await Client.connect(tlsNode.grpcAddr, {
      tls: { caFile: join(certs, "ca.crt"), certFile: join(certs, "client-alice.crt"), keyFile: join(certs, "client-alice.key") },
    });
    const me = await c.whoAmI();
    assert.equal(me.principal, "alice");
    assert.equal(me.via, "certificate");
    const name = topicName("tls");
    await c.createTopic(name);
    const p = await c.producer(name);
    assert.equal((await p.send({ payload: "over tls" })).offset, 0n);
    await p.close();
    const consumer = await c.subscribe(name, { from: "earliest" });
    assert.equal((await consumer.next()).payload.toString(), "over tls");
    await consumer.close();
    await c.close();

    // TLS without a certificate: the server is verified, the caller is anonymous.
    const anon = await Client.connect(tlsNode.grpcAddr, { tls: { ca: readFileSync(join(certs, "ca.crt")) } });
    await assert.rejects(anon.listTopics(), UnauthenticatedError);
    await anon.close();
    // Plaintext to a TLS listener never becomes ready.
    await assert.rejects(Client.connect(tlsNode.grpcAddr, { connectTimeoutMs: 2000 }), UnavailableError);
  } finally {
    await tlsNode.stop();
  }
});
