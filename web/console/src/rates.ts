// Publish and consume rates per topic, from the counters of the node's
// /metrics (hermes_published_records_total and
// hermes_consumed_records_total): the rates this node counts. One poller
// serves every view that subscribes; it stops when none does.
import { useEffect, useState } from 'preact/hooks';
import { text } from './api';

export interface Sample {
  t: number; // ms
  pub: Map<string, number>; // records/s by topic
  con: Map<string, number>;
}

export interface RateState {
  history: Sample[];
  error: string;
}

const intervalMs = 5000;
const keepMs = 5 * 60_000;

let state: RateState = { history: [], error: '' };
let last: { t: number; pub: Map<string, number>; con: Map<string, number> } | null = null;
const listeners = new Set<(s: RateState) => void>();
let running = false;

/** Parses the two counters from Prometheus' text format, summed by topic. */
export function parseCounters(body: string): { pub: Map<string, number>; con: Map<string, number> } {
  const pub = new Map<string, number>();
  const con = new Map<string, number>();
  for (const line of body.split('\n')) {
    let m: Map<string, number>;
    if (line.startsWith('hermes_published_records_total{')) m = pub;
    else if (line.startsWith('hermes_consumed_records_total{')) m = con;
    else continue;
    const tm = /topic="((?:[^"\\]|\\.)*)"/.exec(line);
    const v = Number(line.slice(line.lastIndexOf('}') + 1).trim().split(' ')[0]);
    if (!tm || !Number.isFinite(v)) continue;
    m.set(tm[1], (m.get(tm[1]) ?? 0) + v);
  }
  return { pub, con };
}

function rates(now: Map<string, number>, before: Map<string, number>, secs: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const [topic, v] of now) {
    const d = v - (before.get(topic) ?? 0);
    out.set(topic, d >= 0 ? d / secs : 0);
  }
  return out;
}

async function poll() {
  try {
    const r = await text('/metrics');
    if (!r.ok) throw new Error(r.status === 403 ? 'not permitted to read /metrics (needs describe on the cluster)' : `/metrics: HTTP ${r.status}`);
    const c = parseCounters(r.body);
    const t = Date.now();
    if (last) {
      const secs = (t - last.t) / 1000;
      const s: Sample = { t, pub: rates(c.pub, last.pub, secs), con: rates(c.con, last.con, secs) };
      const history = state.history.filter((h) => h.t > t - keepMs);
      history.push(s);
      state = { history, error: '' };
    } else {
      state = { ...state, error: '' };
    }
    last = { t, ...c };
  } catch (e) {
    state = { ...state, error: e instanceof Error ? e.message : String(e) };
  }
  listeners.forEach((l) => l(state));
  if (listeners.size > 0) window.setTimeout(poll, intervalMs);
  else running = false;
}

export function useRates(): RateState {
  const [s, setS] = useState(state);
  useEffect(() => {
    listeners.add(setS);
    if (!running) {
      running = true;
      poll();
    }
    return () => {
      listeners.delete(setS);
    };
  }, []);
  return s;
}

export function latest(s: RateState): Sample | undefined {
  return s.history[s.history.length - 1];
}
