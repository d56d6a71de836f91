import { useMemo, useState } from 'preact/hooks';
import { latest, Sample, useRates } from '../rates';
import { Field, fmtRate, link, usePage } from '../ui';

function sum(m: Map<string, number>): number {
  let s = 0;
  for (const v of m.values()) s += v;
  return s;
}

/** A line chart of two series over the samples (no library: an SVG). */
function Chart(props: { samples: Sample[]; pick: (s: Sample) => [number, number]; label: string }) {
  const w = 720;
  const h = 200;
  const pad = 40;
  const pts = props.samples.map((s) => ({ t: s.t, v: props.pick(s) }));
  const max = Math.max(1, ...pts.map((p) => Math.max(p.v[0], p.v[1])));
  const t0 = pts.length ? pts[0].t : 0;
  const t1 = pts.length ? pts[pts.length - 1].t : 1;
  const x = (t: number) => pad + ((t - t0) / Math.max(1, t1 - t0)) * (w - pad - 10);
  const y = (v: number) => h - 20 - (v / max) * (h - 40);
  const line = (i: 0 | 1) => pts.map((p, j) => `${j ? 'L' : 'M'}${x(p.t).toFixed(1)},${y(p.v[i]).toFixed(1)}`).join(' ');
  const last = pts[pts.length - 1];
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${w} ${h}`} role="img" aria-label={`${props.label}: publish ${fmtRate(last?.v[0])}, consume ${fmtRate(last?.v[1])}`}>
        <line x1={pad} y1={h - 20} x2={w - 10} y2={h - 20} class="axis" />
        <line x1={pad} y1={20} x2={pad} y2={h - 20} class="axis" />
        <text x={pad - 4} y={24} class="tick" text-anchor="end">
          {max >= 100 ? Math.round(max) : max.toFixed(1)}
        </text>
        <text x={pad - 4} y={h - 20} class="tick" text-anchor="end">
          0
        </text>
        <text x={w - 10} y={h - 4} class="tick" text-anchor="end">
          now
        </text>
        {pts.length > 1 && <path d={line(0)} class="pub" />}
        {pts.length > 1 && <path d={line(1)} class="con" />}
      </svg>
      <figcaption>
        {props.label} (records/s, last 5 minutes): <span class="key-pub">publish {fmtRate(last?.v[0])}</span> ·{' '}
        <span class="key-con">consume {fmtRate(last?.v[1])}</span>
      </figcaption>
    </figure>
  );
}

/** Live publish and consume rates, in all and per topic, from the node's
 * counters, refreshed every 5 s while the page is open. */
export function Rates(props: { query: URLSearchParams }) {
  const r = useRates();
  const [topic, setTopic] = useState(props.query.get('topic') ?? '');
  const now = latest(r);
  const topics = useMemo(() => {
    if (!now) return [];
    const names = new Set([...now.pub.keys(), ...now.con.keys()]);
    return [...names]
      .map((n) => ({ name: n, pub: now.pub.get(n) ?? 0, con: now.con.get(n) ?? 0 }))
      .sort((a, b) => b.pub + b.con - (a.pub + a.con) || a.name.localeCompare(b.name));
  }, [now]);
  const { rows, pager } = usePage(topics, 25, '');
  return (
    <section aria-labelledby="h-rates">
      <h1 id="h-rates">Rates</h1>
      <p class="hint">As this node counts them: records it acknowledged to publishers and delivered to consumers.</p>
      {r.error && (
        <p class="error" role="alert">
          {r.error}
        </p>
      )}
      {r.history.length === 0 && !r.error && <p>Measuring…</p>}
      <Chart samples={r.history} pick={(s) => [sum(s.pub), sum(s.con)]} label="All topics" />
      <div class="toolbar">
        <Field label="Chart one topic">
          <select name="topic" value={topic} onChange={(e) => setTopic(e.currentTarget.value)}>
            <option value="">none</option>
            {topic && !topics.some((t) => t.name === topic) && <option value={topic}>{topic}</option>}
            {topics.map((t) => (
              <option value={t.name}>{t.name}</option>
            ))}
          </select>
        </Field>
      </div>
      {topic && <Chart samples={r.history} pick={(s) => [s.pub.get(topic) ?? 0, s.con.get(topic) ?? 0]} label={topic} />}
      <table aria-label="Rates by topic">
        <thead>
          <tr>
            <th scope="col">Topic</th>
            <th scope="col" class="num">Publish</th>
            <th scope="col" class="num">Consume</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((t) => (
            <tr key={t.name}>
              <td>
                <a href={link('/topics/' + encodeURIComponent(t.name))}>{t.name}</a>
              </td>
              <td class="num">{fmtRate(t.pub)}</td>
              <td class="num">{fmtRate(t.con)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {pager}
    </section>
  );
}
