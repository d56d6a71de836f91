/**
 * Runs the README's quick start against a live node, as a user would:
 * the code block, unchanged, in an ES module importing the package by its
 * name. The README cannot drift from the API.
 */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { Client } from "../src/index.js";
import { HermesNode, PKG_DIR } from "./hermes-node.js";

let node: HermesNode;

before(async () => {
  node = await HermesNode.start();
});

after(async () => {
  await node?.stop();
});

/** The first ```ts block after the "## Quick start" heading. */
function quickStart(): string {
  const readme = readFileSync(join(PKG_DIR, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Quick start"));
  const m = /```ts\n([\s\S]*?)```/.exec(section);
  assert.ok(m, "the README has a quick start code block");
  return m[1]!;
}

test("the README's quick start runs", async () => {
  const code = quickStart();
  assert.match(code, /from "@hermes-mq\/client"/);
  // Inside the package, so that the package resolves itself by its name.
  const file = join(PKG_DIR, "dist", "readme-quickstart.mjs");
  writeFileSync(file, code);
  try {
    const run = async (): Promise<string> => {
      const { stdout } = await promisify(execFile)(process.execPath, [file], {
        env: { ...process.env, HERMES_ADDR: node.grpcAddr },
        timeout: 30_000,
      });
      return stdout;
    };
    const out = await run();
    assert.match(out, /^stored at \d+\/0 \d+\/\d+ \d+\/\d+$/m);
    const lines = out.split("\n").filter((l) => l.startsWith("partition "));
    assert.equal(lines.length, 3, out);
    const fruits = lines.map((l) => JSON.parse(l.slice(l.indexOf(": ") + 2)).fruit).sort();
    assert.deepEqual(fruits, ["apple", "banana", "cherry"]);

    const client = await Client.connect(node.grpcAddr);
    const group = await client.describeGroup("billing");
    assert.equal(
      group.partitions.reduce((n, p) => n + p.committedOffset, 0n),
      3n,
      "closing the consumer committed the three records",
    );
    // A second run: the topic exists (ifNotExists), the group resumes after its commits.
    const again = await run();
    const lines2 = again.split("\n").filter((l) => l.startsWith("partition "));
    assert.equal(lines2.length, 3);
    for (const l of lines2) assert.doesNotMatch(l, /offset 0:/, "resumed after the committed offsets");
    await client.close();
  } finally {
    rmSync(file, { force: true });
  }
});
