import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

export function fmtBytes(n: number): string {
  if (!Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

export function fmtNum(n: number): string {
  return Number.isFinite(n) ? n.toLocaleString('en-US') : '—';
}

export function fmtRate(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '—';
  if (n >= 100) return `${Math.round(n).toLocaleString('en-US')}/s`;
  return `${n.toFixed(1)}/s`;
}

export function fmtMs(ms: number): string {
  if (ms <= 0) return 'none';
  const units: [number, string][] = [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'min'],
    [1000, 's'],
  ];
  for (const [u, s] of units) if (ms % u === 0) return `${ms / u} ${s}`;
  return `${ms} ms`;
}

export function errText(e: unknown): string {
  if (e instanceof ApiError) return `${e.code}: ${e.message}`;
  if (e instanceof Error) return e.message;
  return String(e);
}

/** Runs load now and every intervalMs (0: once) while mounted and the tab is visible. */
export function usePoll<T>(load: () => Promise<T>, deps: unknown[], intervalMs = 0) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string>('');
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    let timer: number | undefined;
    const run = async () => {
      if (document.visibilityState === 'visible' || data === undefined) {
        try {
          const d = await load();
          if (!live) return;
          setData(d);
          setError('');
        } catch (e) {
          if (live) setError(errText(e));
        }
      }
      if (live && intervalMs > 0) timer = window.setTimeout(run, intervalMs);
    };
    run();
    return () => {
      live = false;
      clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  return { data, error, reload: () => setTick((t) => t + 1), setData };
}

export function ErrorBox({ error }: { error: string }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error}
    </p>
  );
}

export function Notice({ text }: { text: string }) {
  if (!text) return null;
  return (
    <p class="notice" role="status">
      {text}
    </p>
  );
}

/** A page of items, with previous/next buttons. */
export function usePage<T>(items: T[], size: number, resetKey: unknown) {
  const [page, setPage] = useState(0);
  useEffect(() => setPage(0), [resetKey]);
  const pages = Math.max(1, Math.ceil(items.length / size));
  const p = Math.min(page, pages - 1);
  return {
    rows: items.slice(p * size, (p + 1) * size),
    pager: (
      <nav class="pager" aria-label="Pages">
        <button type="button" disabled={p === 0} onClick={() => setPage(p - 1)}>
          ← Previous
        </button>
        <span aria-live="polite">
          Page {p + 1} of {pages} ({fmtNum(items.length)} in all)
        </span>
        <button type="button" disabled={p >= pages - 1} onClick={() => setPage(p + 1)}>
          Next →
        </button>
      </nav>
    ),
  };
}

/** A modal dialog: focus moves into it, Escape or Cancel closes it. */
export function Dialog(props: { title: string; onClose: () => void; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current!;
    const before = document.activeElement as HTMLElement | null;
    if (!d.open) d.showModal();
    const first = d.querySelector<HTMLElement>('input, select, textarea, button:not(.close)');
    first?.focus();
    return () => before?.focus();
  }, []);
  return (
    <dialog
      ref={ref}
      aria-label={props.title}
      onCancel={(e) => {
        e.preventDefault();
        props.onClose();
      }}
    >
      <header class="dialog-head">
        <h2>{props.title}</h2>
        <button type="button" class="close" aria-label="Close" onClick={props.onClose}>
          ×
        </button>
      </header>
      {props.children}
    </dialog>
  );
}

export function Field(props: { label: string; hint?: string; children: ComponentChildren }) {
  return (
    <div class="field">
      <label>
        <span class="label">{props.label}</span>
        {props.children}
      </label>
      {props.hint && <span class="hint">{props.hint}</span>}
    </div>
  );
}

export function Stat(props: { label: string; value: ComponentChildren; tone?: 'ok' | 'bad' }) {
  return (
    <div class={'stat ' + (props.tone ?? '')}>
      <span class="stat-value">{props.value}</span>
      <span class="stat-label">{props.label}</span>
    </div>
  );
}

export function link(path: string): string {
  return '#' + path;
}

/** Records per second each topic grew by between two polls of its
 * partitions' end offsets (what the topic list already reads: no
 * extra request). */
export function useGrowth(topics: { name: string; partitions: { end_offset: number }[] }[] | undefined): Map<string, number> | undefined {
  const prev = useRef<{ t: number; ends: Map<string, number> } | null>(null);
  const [rates, setRates] = useState<Map<string, number> | undefined>(undefined);
  useEffect(() => {
    if (!topics) return;
    const t = Date.now();
    const ends = new Map(topics.map((x) => [x.name, x.partitions.reduce((s, p) => s + p.end_offset, 0)]));
    const p = prev.current;
    if (p && t - p.t > 500) {
      const out = new Map<string, number>();
      for (const [name, end] of ends) {
        const before = p.ends.get(name);
        if (before !== undefined) out.set(name, Math.max(0, end - before) / ((t - p.t) / 1000));
      }
      setRates(out);
    }
    prev.current = { t, ends };
  }, [topics]);
  return rates;
}
