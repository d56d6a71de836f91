// Page load times of the console against a node with many topics and
// groups (default 1,000 and 100): `npm run perf` after `make build`.
// TOPICS, GROUPS and PARTITIONS change the sizes.
import { chromium } from 'playwright-core';
import { browserPath, rest, startNode } from '../test/node.mjs';

const topics = Number(process.env.TOPICS ?? 1000);
const groups = Number(process.env.GROUPS ?? 100);
const partitions = Number(process.env.PARTITIONS ?? 3);

async function pool(n, width, f) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) await f(next++);
  }));
}

const node = await startNode();
try {
  const api = rest(node);
  const name = (i) => `perf-${String(i).padStart(4, '0')}`;
  let t0 = Date.now();
  await pool(topics, 8, async (i) => {
    const r = await api('POST', '/v1/topics', { name: name(i), partitions });
    if (r.status !== 201) throw new Error(`create ${name(i)}: ${r.status} ${JSON.stringify(r.json)}`);
    await api('POST', `/v1/topics/${name(i)}/records`, { partition: 0, records: [{ payload: 'a' }, { payload: 'b' }] });
  });
  await pool(groups, 8, async (i) => {
    const offsets = Array.from({ length: partitions }, (_, p) => ({ topic: name(i % topics), partition: p, offset: 0 }));
    const r = await api('POST', `/v1/groups/group-${i}/commits`, { offsets });
    if (r.status !== 204) throw new Error(`commit group-${i}: ${r.status}`);
  });
  console.log(`${topics} topics of ${partitions} partitions and ${groups} groups made in ${Date.now() - t0} ms`);

  const browser = await chromium.launch({ executablePath: browserPath, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  const page = await browser.newPage({ viewport: { width: 1366, height: 768 } });
  const views = [
    ['cluster overview', '/ui/#/overview', () => page.getByRole('cell', { name: /this node/ }).waitFor()],
    ['topics', '/ui/#/topics', () => page.getByRole('link', { name: name(0) }).waitFor()],
    ['topic', `/ui/#/topics/${name(1)}`, () => page.getByRole('table', { name: 'Partitions' }).getByRole('row').nth(partitions).waitFor()],
    ['messages', `/ui/#/messages?topic=${name(1)}&partition=0`, () => page.getByText('offsets 0 to 1').waitFor()],
    ['groups', '/ui/#/groups', () => page.getByRole('link', { name: 'group-0', exact: true }).waitFor()],
    ['group', '/ui/#/groups/group-1', () => page.getByRole('table', { name: 'Group partitions' }).getByRole('row').nth(partitions).waitFor()],
    ['rates', '/ui/#/rates', () => page.getByRole('heading', { name: 'Rates' }).waitFor()],
  ];
  for (const [label, path, ready] of views) {
    for (let run = 0; run < 2; run++) {
      await page.goto('about:blank');
      t0 = Date.now();
      await page.goto(node.base + path);
      await ready();
      console.log(`${label}${run ? ' (cached)' : ''}: ${Date.now() - t0} ms`);
    }
  }
  for (const p of ['/v1/topics', '/v1/groups', '/v1/cluster/status', '/metrics']) {
    t0 = Date.now();
    const r = await fetch(node.base + p);
    const body = await r.text();
    console.log(`GET ${p}: ${Date.now() - t0} ms, ${(body.length / 1024).toFixed(0)} KiB`);
  }
  await browser.close();
} finally {
  await node.stop();
}
