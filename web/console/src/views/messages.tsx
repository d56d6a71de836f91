import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, enc, FetchResponse, PublishAck, StoredRecord, Topic } from '../api';
import { Dialog, ErrorBox, errText, Field, fmtNum, Notice, usePoll } from '../ui';

/** The most records one window holds: the browser never tails a
 * partition, it reads a bounded window and pages through it. */
export const maxWindow = 500;
const perFetch = 500;

type Format = 'text' | 'json' | 'hex';

function bytesOf(text?: string, b64?: string): Uint8Array {
  if (b64 !== undefined) {
    const bin = atob(b64);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  return new TextEncoder().encode(text ?? '');
}

export function hexDump(b: Uint8Array): string {
  const lines: string[] = [];
  for (let i = 0; i < b.length; i += 16) {
    const row = b.subarray(i, i + 16);
    const hex = Array.from(row, (x) => x.toString(16).padStart(2, '0')).join(' ');
    const ascii = Array.from(row, (x) => (x >= 32 && x < 127 ? String.fromCharCode(x) : '.')).join('');
    lines.push(`${i.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${ascii}`);
  }
  return lines.join('\n');
}

export function show(text: string | undefined, b64: string | undefined, f: Format): string {
  if (f === 'hex') return hexDump(bytesOf(text, b64));
  if (b64 !== undefined) return `(${bytesOf(text, b64).length} bytes, not UTF-8: choose hex)`;
  if (f === 'json') {
    try {
      return JSON.stringify(JSON.parse(text ?? ''), null, 2);
    } catch {
      return text ?? '';
    }
  }
  return text ?? '';
}

function matches(r: StoredRecord, q: string, where: { key: boolean; headers: boolean; payload: boolean }): boolean {
  const has = (t?: string, b64?: string) => {
    if (t !== undefined) return t.toLowerCase().includes(q);
    if (b64 !== undefined) return hexDump(bytesOf(undefined, b64)).toLowerCase().includes(q);
    return false;
  };
  if (where.key && has(r.key, r.key_base64)) return true;
  if (where.payload && has(r.payload, r.payload_base64)) return true;
  if (where.headers) for (const h of r.headers ?? []) if (has(h.key, h.key_base64) || has(h.value, h.value_base64)) return true;
  return false;
}

interface RecordWindow {
  topic: string;
  partition: number;
  from: number;
  records: StoredRecord[];
  next: number;
  start: number;
  hw: number;
}

/** Reads up to count records of a partition from offset from. */
async function readWindow(topic: string, partition: number, from: number, count: number): Promise<RecordWindow> {
  const base = `/v1/topics/${enc(topic)}/partitions/${partition}/records`;
  const records: StoredRecord[] = [];
  let off = from;
  let start = 0;
  let hw = 0;
  for (let i = 0; i < 20 && records.length < count; i++) {
    const r = await api<FetchResponse>('GET', `${base}?offset=${off}&max=${Math.min(perFetch, count - records.length)}`);
    start = r.start_offset;
    hw = r.high_watermark;
    records.push(...r.records);
    if (r.records.length === 0 || r.next_offset >= r.high_watermark) {
      off = r.next_offset;
      break;
    }
    off = r.next_offset;
  }
  return { topic, partition, from, records, next: off, start, hw };
}

export function Messages(props: { query: URLSearchParams }) {
  const q = props.query;
  const topics = usePoll(() => api<{ topics: Topic[] }>('GET', '/v1/topics'), [], 0);
  const [topic, setTopic] = useState(q.get('topic') ?? '');
  const [partition, setPartition] = useState(q.get('partition') ?? '0');
  const [startBy, setStartBy] = useState<'newest' | 'offset' | 'time'>(q.get('offset') ? 'offset' : 'newest');
  const [offset, setOffset] = useState(q.get('offset') ?? '0');
  const [time, setTime] = useState('');
  const [count, setCount] = useState('50');
  const [search, setSearch] = useState('');
  const [where, setWhere] = useState({ key: true, headers: true, payload: true });
  const [format, setFormat] = useState<Format>('text');
  const [win, setWin] = useState<RecordWindow | null>(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const [publishing, setPublishing] = useState(false);

  const t = topics.data?.topics.find((x) => x.name === topic);
  const n = Math.max(1, Math.min(maxWindow, Number(count) || 50));

  const load = async (from?: number) => {
    setError('');
    setBusy(true);
    try {
      const p = Number(partition);
      const desc = await api<Topic>('GET', '/v1/topics/' + enc(topic));
      const part = desc.partitions.find((x) => x.partition === p);
      if (!part) throw new Error(`${topic} has no partition ${p} (it has ${desc.partitions.length})`);
      let start = from;
      if (start === undefined) {
        if (startBy === 'newest') start = part.end_offset - n;
        else if (startBy === 'offset') start = Number(offset);
        else {
          const ms = new Date(time).getTime();
          if (!Number.isFinite(ms)) throw new Error('choose a date and time');
          start = (await api<{ offset: number }>('GET', `/v1/topics/${enc(topic)}/partitions/${p}/offset?timestamp_ms=${Math.max(0, ms)}`)).offset;
        }
      }
      start = Math.max(part.start_offset, Math.min(start, part.end_offset));
      setWin(await readWindow(topic, p, start, n));
    } catch (e) {
      setError(errText(e));
    } finally {
      setBusy(false);
    }
  };

  useEffect(() => {
    if (q.get('topic')) load();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  const shown = useMemo(() => {
    const s = search.trim().toLowerCase();
    if (!win) return [];
    return s ? win.records.filter((r) => matches(r, s, where)) : win.records;
  }, [win, search, where]);

  return (
    <section aria-labelledby="h-messages">
      <div class="title-row">
        <h1 id="h-messages">Messages</h1>
        <button type="button" class="primary" disabled={!topic} onClick={() => setPublishing(true)}>
          Publish a record
        </button>
      </div>
      <form
        class="toolbar wrap"
        onSubmit={(e) => {
          e.preventDefault();
          load();
        }}
        aria-label="Choose records"
      >
        <Field label="Topic">
          <input name="topic" list="topic-names" required value={topic} onInput={(e) => setTopic(e.currentTarget.value)} />
          <datalist id="topic-names">
            {(topics.data?.topics ?? []).slice(0, 1000).map((x) => (
              <option value={x.name} />
            ))}
          </datalist>
        </Field>
        <Field label="Partition">
          <input
            name="partition"
            type="number"
            min="0"
            max={t ? t.config.partitions - 1 : undefined}
            required
            value={partition}
            onInput={(e) => setPartition(e.currentTarget.value)}
          />
        </Field>
        <Field label="Start at">
          <select name="start_by" value={startBy} onChange={(e) => setStartBy(e.currentTarget.value as typeof startBy)}>
            <option value="newest">the newest records</option>
            <option value="offset">an offset</option>
            <option value="time">a time</option>
          </select>
        </Field>
        {startBy === 'offset' && (
          <Field label="Offset">
            <input name="offset" type="number" min="0" value={offset} onInput={(e) => setOffset(e.currentTarget.value)} />
          </Field>
        )}
        {startBy === 'time' && (
          <Field label="Time (local)">
            <input name="time" type="datetime-local" step="1" value={time} onInput={(e) => setTime(e.currentTarget.value)} />
          </Field>
        )}
        <Field label="Records" hint={`at most ${maxWindow}`}>
          <input name="count" type="number" min="1" max={maxWindow} value={count} onInput={(e) => setCount(e.currentTarget.value)} />
        </Field>
        <button type="submit" class="primary" disabled={busy || !topic}>
          {busy ? 'Loading…' : 'Load'}
        </button>
      </form>
      <ErrorBox error={error || topics.error} />
      {win && (
        <>
          <div class="toolbar wrap">
            <Field label="Search this window" hint="in the records loaded, not the whole partition">
              <input name="search" type="search" value={search} onInput={(e) => setSearch(e.currentTarget.value)} />
            </Field>
            <fieldset class="choice">
              <legend>Search in</legend>
              {(['key', 'headers', 'payload'] as const).map((k) => (
                <label>
                  <input type="checkbox" checked={where[k]} onChange={(e) => setWhere({ ...where, [k]: e.currentTarget.checked })} /> {k}
                </label>
              ))}
            </fieldset>
            <Field label="Show payloads as">
              <select name="format" value={format} onChange={(e) => setFormat(e.currentTarget.value as Format)}>
                <option value="text">text</option>
                <option value="json">JSON</option>
                <option value="hex">hex</option>
              </select>
            </Field>
          </div>
          <nav class="pager" aria-label="Windows">
            <button type="button" disabled={busy || win.from <= win.start} onClick={() => load(Math.max(win.start, win.from - n))}>
              ← Older
            </button>
            <span aria-live="polite">
              {win.topic}/{win.partition}: offsets {fmtNum(win.from)} to {fmtNum(win.next - 1)} ({win.records.length} records
              {search.trim() ? `, ${shown.length} matching` : ''}); partition holds {fmtNum(win.start)} to {fmtNum(win.hw - 1)}
            </span>
            <button type="button" disabled={busy || win.next >= win.hw} onClick={() => load(win.next)}>
              Newer →
            </button>
          </nav>
          <ol class="records" aria-label="Records">
            {shown.map((r) => (
              <RecordItem key={r.offset} r={r} format={format} />
            ))}
          </ol>
          {shown.length === 0 && <p>No records{search.trim() ? ' match the search in this window' : ' in this window'}.</p>}
        </>
      )}
      {publishing && (
        <Publish
          topic={topic}
          partitions={t?.config.partitions}
          onClose={() => setPublishing(false)}
        />
      )}
    </section>
  );
}

function RecordItem(props: { r: StoredRecord; format: Format }) {
  const r = props.r;
  const key = r.key !== undefined ? r.key : r.key_base64 !== undefined ? '(binary)' : '';
  const preview = show(r.payload, r.payload_base64, props.format === 'hex' ? 'text' : props.format).replace(/\s+/g, ' ').slice(0, 160);
  return (
    <li class="record" data-offset={r.offset}>
      <details>
        <summary>
          <span class="off">#{r.offset}</span>
          <time dateTime={r.timestamp}>{r.timestamp.replace('T', ' ').slice(0, 23)}</time>
          {key && <span class="key">key {key}</span>}
          {r.headers?.length ? <span class="tag">{r.headers.length} headers</span> : null}
          <span class="preview">{preview}</span>
        </summary>
        <div class="record-body">
          <p class="meta">
            Message id {r.message_id} · partition {r.partition} · offset {r.offset}
          </p>
          {r.key_base64 !== undefined && <pre aria-label="Key">{show(undefined, r.key_base64, 'hex')}</pre>}
          {r.headers?.length ? (
            <table class="headers" aria-label="Headers">
              <tbody>
                {r.headers.map((h) => (
                  <tr>
                    <th scope="row">{h.key ?? show(undefined, h.key_base64, 'hex')}</th>
                    <td>{h.value !== undefined ? h.value : h.value_base64 !== undefined ? show(undefined, h.value_base64, 'hex') : '(no value)'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : null}
          <pre class="payload" aria-label="Payload">
            {show(r.payload, r.payload_base64, props.format)}
          </pre>
        </div>
      </details>
    </li>
  );
}

function Publish(props: { topic: string; partitions?: number; onClose: () => void }) {
  const [partition, setPartition] = useState('');
  const [key, setKey] = useState('');
  const [headers, setHeaders] = useState('');
  const [payload, setPayload] = useState('');
  const [error, setError] = useState('');
  const [notice, setNotice] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError('');
    setNotice('');
    const body: Record<string, unknown> = { payload };
    if (partition.trim() !== '') body.partition = Number(partition);
    if (key !== '') body.key = key;
    const hs = headers
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .map((l) => {
        const i = l.indexOf('=');
        return i < 0 ? { key: l, value: '' } : { key: l.slice(0, i).trim(), value: l.slice(i + 1) };
      });
    if (hs.length) body.headers = hs;
    setBusy(true);
    try {
      const ack = await api<PublishAck>('POST', `/v1/topics/${enc(props.topic)}/records`, body);
      const r = ack.records[0];
      setNotice(`Published to partition ${r.partition} at offset ${r.offset}.`);
    } catch (err) {
      setError(errText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Dialog title={`Publish to ${props.topic}`} onClose={props.onClose}>
        <form onSubmit={submit}>
          <Field label="Partition" hint="empty: chosen by key, else spread">
            <input name="partition" type="number" min="0" max={props.partitions ? props.partitions - 1 : undefined} value={partition} onInput={(e) => setPartition(e.currentTarget.value)} />
          </Field>
          <Field label="Key">
            <input name="key" value={key} onInput={(e) => setKey(e.currentTarget.value)} />
          </Field>
          <Field label="Headers" hint="one name=value a line">
            <textarea name="headers" rows={2} value={headers} onInput={(e) => setHeaders(e.currentTarget.value)} />
          </Field>
          <Field label="Payload (text)">
            <textarea name="payload" rows={6} value={payload} onInput={(e) => setPayload(e.currentTarget.value)} />
          </Field>
          <ErrorBox error={error} />
          <Notice text={notice} />
          <div class="actions">
            <button type="button" onClick={props.onClose}>
              Close
            </button>
            <button type="submit" class="primary" disabled={busy}>
              Publish
            </button>
          </div>
        </form>
    </Dialog>
  );
}
