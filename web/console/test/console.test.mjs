// The console in a real browser (Debian's chromium, headless, driven by
// playwright-core) against real `hermes serve` processes on free ports.
// Every request the page makes is checked to go to the node itself.
//
//   HERMES_BIN   the hermes binary (default ../../bin/hermes)
//   CHROMIUM     the browser (default /usr/bin/chromium)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { browserPath, cli, rest, startNode } from './node.mjs';

let browser;
/** A page whose every request must go to node; others are refused and counted. */
async function openPage(node) {
  const context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
  const foreign = [];
  const host = new URL(node.base).host;
  await context.route('**/*', (route) => {
    const u = new URL(route.request().url());
    if (u.protocol !== 'data:' && u.host !== host) {
      foreign.push(u.href);
      return route.abort();
    }
    return route.continue();
  });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  return { page, foreign, errors, close: () => context.close() };
}

before(async () => {
  browser = await chromium.launch({ executablePath: browserPath, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
});
after(async () => {
  await browser?.close();
});

describe('console without authentication', () => {
  let node;
  let api;
  let ui;
  before(async () => {
    node = await startNode();
    api = rest(node);
    ui = await openPage(node);
  });
  after(async () => {
    await ui?.close();
    await node?.stop();
    assert.deepEqual(ui.foreign, [], 'requests to other hosts');
    assert.deepEqual(ui.errors, [], 'page errors');
  });

  test('cluster overview shows this node, ready', async () => {
    const { page } = ui;
    const t0 = Date.now();
    await page.goto(node.base + '/ui/');
    await page.getByRole('heading', { name: 'Cluster' }).waitFor();
    await page.getByText('this node', { exact: true }).first().waitFor();
    await page.locator('.stat', { hasText: 'ready' }).first().waitFor();
    const cl = (await api('GET', '/v1/cluster')).json;
    await page.getByRole('cell', { name: new RegExp('^' + cl.node_id + '\\s*this node') }).waitFor();
    console.log(`overview loaded in ${Date.now() - t0} ms`);
  });

  test('a topic created with the CLI appears in the topic list', async () => {
    const { page } = ui;
    await cli(node, 'topic', 'create', 'cli-topic', '--partitions', '2');
    await page.goto(node.base + '/ui/#/topics');
    await page.getByLabel('Filter by name').fill('cli-topic');
    const row = page.getByRole('row', { name: /cli-topic/ });
    await row.waitFor();
    assert.match(await row.innerText(), /cli-topic\s+2\s/);
  });

  test('create, configure and delete a topic in the console', async () => {
    const { page } = ui;
    await page.goto(node.base + '/ui/#/topics');
    await page.getByRole('button', { name: 'Create topic' }).click();
    const dlg = page.getByRole('dialog', { name: 'Create topic' });
    await dlg.getByLabel('Name').fill('ui-topic');
    await dlg.getByLabel('Partitions').fill('3');
    await dlg.getByLabel('Name').press('Enter');
    await page.getByRole('heading', { name: 'ui-topic' }).waitFor();
    let t = await api('GET', '/v1/topics/ui-topic');
    assert.equal(t.status, 200);
    assert.equal(t.json.config.partitions, 3);
    await page.getByRole('table', { name: 'Partitions' }).getByRole('row').nth(3).waitFor();

    await page.getByRole('button', { name: 'Configure' }).click();
    const cfg = page.getByRole('dialog', { name: 'Configure ui-topic' });
    await cfg.getByLabel('Retention (ms)').fill('7200000');
    await cfg.getByLabel('Partitions').fill('4');
    await cfg.getByRole('button', { name: 'Apply' }).click();
    await page.getByText('Configuration changed.').waitFor();
    t = await api('GET', '/v1/topics/ui-topic');
    assert.equal(t.json.config.retention_ms, 7200000);
    assert.equal(t.json.config.partitions, 4);

    // Escape closes a dialog without doing anything.
    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('dialog', { name: 'Delete ui-topic' }).waitFor();
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    assert.equal((await api('GET', '/v1/topics/ui-topic')).status, 200);
  });

  test('a record published in the console is read back over REST', async () => {
    const { page } = ui;
    await page.goto(node.base + '/ui/#/messages?topic=ui-topic&partition=1');
    await page.getByRole('button', { name: 'Publish a record' }).click();
    const dlg = page.getByRole('dialog', { name: 'Publish to ui-topic' });
    await dlg.getByLabel('Partition').fill('1');
    await dlg.getByLabel('Key').fill('k-console');
    await dlg.getByLabel('Headers').fill('trace=abc\nsource=console');
    await dlg.getByLabel('Payload (text)').fill('{"hello":"console","n":1}');
    await dlg.getByRole('button', { name: 'Publish', exact: true }).click();
    await dlg.getByText('Published to partition 1 at offset 0.').waitFor();
    await page.keyboard.press('Escape');

    const r = await api('GET', '/v1/topics/ui-topic/partitions/1/records?offset=0');
    assert.equal(r.status, 200);
    assert.equal(r.json.records.length, 1);
    const rec = r.json.records[0];
    assert.equal(rec.key, 'k-console');
    assert.equal(rec.payload, '{"hello":"console","n":1}');
    assert.deepEqual(rec.headers.map((h) => [h.key, h.value]), [['trace', 'abc'], ['source', 'console']]);
  });

  test('the message browser shows, searches and formats records published over REST', async () => {
    const { page } = ui;
    const records = [];
    for (let i = 0; i < 30; i++) records.push({ key: `key-${i}`, payload: i === 17 ? '{"needle":true}' : `plain ${i}`, headers: [{ key: 'i', value: String(i) }] });
    records.push({ payload_base64: Buffer.from([0, 1, 2, 255]).toString('base64') });
    assert.equal((await api('POST', '/v1/topics/cli-topic/records', { partition: 0, records })).status, 200);

    await page.goto(node.base + '/ui/#/messages');
    await page.getByLabel('Topic').fill('cli-topic');
    await page.getByLabel('Partition').fill('0');
    await page.getByLabel('Start at').selectOption('offset');
    await page.getByLabel('Offset', { exact: true }).fill('10');
    await page.getByRole('spinbutton', { name: 'Records' }).fill('10');
    await page.getByRole('spinbutton', { name: 'Records' }).press('Enter');
    const items = page.getByRole('list', { name: 'Records' }).getByRole('listitem');
    await page.getByText('offsets 10 to 19').waitFor();
    assert.equal(await items.count(), 10);
    assert.equal(await items.first().getAttribute('data-offset'), '10');

    await page.getByLabel('Search this window').fill('needle');
    await page.getByText('1 matching').waitFor();
    assert.equal(await items.count(), 1);
    await items.first().locator('summary').click();
    await page.getByLabel('Show payloads as').selectOption('json');
    assert.match(await items.first().getByLabel('Payload').innerText(), /"needle": true/);

    // By time: every record was published just now, so a minute ago is offset 0.
    await page.getByLabel('Search this window').fill('');
    await page.getByLabel('Start at').selectOption('time');
    const d = new Date(Date.now() - 60_000);
    const local = new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
    await page.getByLabel('Time (local)').fill(local);
    await page.getByRole('button', { name: 'Load' }).click();
    await page.getByText('offsets 0 to 9').waitFor();

    // Newest: the binary record last, shown in hex.
    await page.getByLabel('Start at').selectOption('newest');
    await page.getByRole('spinbutton', { name: 'Records' }).fill('5');
    await page.getByRole('button', { name: 'Load' }).click();
    await page.getByText('offsets 26 to 30').waitFor();
    await page.getByLabel('Show payloads as').selectOption('hex');
    const last = items.last();
    await last.locator('summary').click();
    assert.match(await last.getByLabel('Payload').innerText(), /00000000 {2}00 01 02 ff/);
    await page.getByRole('button', { name: '← Older' }).click();
    await page.getByText('offsets 21 to 25').waitFor();
  });

  test('an offset reset in the console moves the committed offset the CLI shows', async () => {
    const { page } = ui;
    assert.equal((await api('POST', '/v1/groups/billing/commits', { offsets: [{ topic: 'cli-topic', partition: 0, offset: 20 }] })).status, 204);
    await page.goto(node.base + '/ui/#/groups');
    await page.getByRole('link', { name: 'billing' }).click();
    const row = page.locator('tr[data-topic="cli-topic"][data-partition="0"]');
    await row.locator('.committed', { hasText: '20' }).waitFor();

    await page.getByRole('button', { name: 'Reset offsets' }).click();
    const dlg = page.getByRole('dialog', { name: 'Reset offsets of billing' });
    await dlg.getByLabel('Partitions').fill('0');
    await dlg.getByLabel('Reset to').selectOption('offset');
    await dlg.getByLabel('Offset', { exact: true }).fill('7');
    await dlg.getByRole('button', { name: 'Preview' }).click();
    await dlg.getByRole('table', { name: 'New offsets' }).getByRole('cell', { name: '7', exact: true }).waitFor();
    await dlg.getByRole('button', { name: 'Apply' }).click();
    await page.getByText('Committed 1 new offset.').waitFor();
    let { stdout } = await cli(node, 'group', 'describe', 'billing', '-o', 'json');
    let p0 = JSON.parse(stdout).partitions.find((p) => p.topic === 'cli-topic' && p.partition === 0);
    assert.equal(p0.committed_offset, 7);

    await page.getByRole('button', { name: 'Reset offsets' }).click();
    await dlg.getByLabel('Reset to').selectOption('earliest');
    await dlg.getByRole('button', { name: 'Preview' }).click();
    await dlg.getByRole('table', { name: 'New offsets' }).waitFor();
    await dlg.getByRole('button', { name: 'Apply' }).click();
    await page.getByText('Committed 2 new offsets.').waitFor();
    ({ stdout } = await cli(node, 'group', 'describe', 'billing', '-o', 'json'));
    p0 = JSON.parse(stdout).partitions.find((p) => p.topic === 'cli-topic' && p.partition === 0);
    assert.equal(p0.committed_offset, 0);
    await row.locator('.committed', { hasText: /^0$/ }).waitFor();
  });

  test('live rates chart the publish rate of a topic', async () => {
    const { page } = ui;
    await page.goto(node.base + '/ui/#/rates');
    await page.getByRole('heading', { name: 'Rates' }).waitFor();
    // Publish while the page samples the counters (every 5 s).
    let publishing = true;
    const load = (async () => {
      while (publishing) {
        await api('POST', '/v1/topics/ui-topic/records', { records: Array.from({ length: 20 }, (_, i) => ({ payload: 'r' + i })) });
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    try {
      const row = page.getByRole('table', { name: 'Rates by topic' }).getByRole('row', { name: /ui-topic\s+[1-9]/ });
      await row.waitFor({ timeout: 20_000 });
      await page.getByLabel('Chart one topic').selectOption('ui-topic');
      await page.locator('figure.chart', { hasText: 'ui-topic' }).locator('path.pub').waitFor();
    } finally {
      publishing = false;
      await load;
    }
  });

  test('keyboard: tab reaches the sections, Enter follows them', async () => {
    const { page } = ui;
    await page.goto(node.base + '/ui/?fresh#/overview');
    await page.getByRole('heading', { name: 'Cluster' }).waitFor();
    await page.keyboard.press('Tab'); // skip link
    await page.keyboard.press('Tab'); // Cluster
    await page.keyboard.press('Tab'); // Topics
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Topics');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Topics' }).waitFor();
  });

  test('the topic is deleted from the console', async () => {
    const { page } = ui;
    await page.goto(node.base + '/ui/#/topics/ui-topic');
    await page.getByRole('button', { name: 'Delete' }).click();
    const dlg = page.getByRole('dialog', { name: 'Delete ui-topic' });
    await dlg.getByLabel("Type the topic's name to confirm").fill('ui-topic');
    await dlg.getByRole('button', { name: 'Delete topic' }).click();
    await page.getByRole('heading', { name: 'Topics' }).waitFor();
    assert.equal((await api('GET', '/v1/topics/ui-topic')).status, 404);
  });

  test('GraphiQL runs from the node alone', async () => {
    const { page } = ui;
    await page.goto(node.base + '/graphql/ui');
    await page.locator('.graphiql-container').waitFor({ timeout: 15_000 });
  });
});

describe('console with authentication', () => {
  let node;
  let admin;
  let ui;
  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hermes-console-pw-'));
    writeFileSync(join(dir, 'pw'), 'admin-password-1\n');
    node = await startNode(['--auth', '--bootstrap-user', 'admin', '--bootstrap-password-file', join(dir, 'pw'), '--superusers', 'admin']);
    admin = rest(node, 'Basic ' + Buffer.from('admin:admin-password-1').toString('base64'));
    for (const t of ['visible', 'hidden']) assert.equal((await admin('POST', '/v1/topics', { name: t })).status, 201);
    assert.equal((await admin('POST', '/v1/users', { name: 'reader', password: 'reader-password-1' })).status, 201);
    const acl = { principal: 'reader', resource_type: 'topic', name: 'visible', operation: 'describe', permission: 'allow' };
    assert.equal((await admin('POST', '/v1/acls', { acls: [acl] })).status, 204);
    ui = await openPage(node);
  });
  after(async () => {
    await ui?.close();
    await node?.stop();
    assert.deepEqual(ui.foreign, [], 'requests to other hosts');
  });

  test('the login page refuses a wrong password, then lists only what the user may describe', async () => {
    const { page } = ui;
    await page.goto(node.base + '/ui/#/topics');
    await page.getByRole('heading', { name: 'Sign in to Hermes' }).waitFor();
    await page.getByLabel('User', { exact: true }).fill('reader');
    await page.getByLabel('Password', { exact: true }).fill('wrong-password');
    await page.getByLabel('Password', { exact: true }).press('Enter');
    await page.getByRole('alert').getByText(/UNAUTHENTICATED/).waitFor();

    await page.getByLabel('Password', { exact: true }).fill('reader-password-1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('Signed in as').waitFor();
    await page.getByRole('heading', { name: 'Topics' }).waitFor();
    await page.getByRole('link', { name: 'visible' }).waitFor();
    assert.equal(await page.getByRole('link', { name: 'hidden' }).count(), 0);

    // What the user may not describe is said, not shown.
    await page.getByRole('link', { name: 'Cluster' }).click();
    await page.getByText('may not describe the cluster').waitFor();

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to Hermes' }).waitFor();
  });
});
