import { useMemo, useState } from 'preact/hooks';
import { api, Topic } from '../api';
import { Dialog, ErrorBox, errText, Field, fmtBytes, fmtMs, fmtNum, fmtRate, link, useGrowth, usePage, usePoll } from '../ui';

const pageSize = 50;

/** Topics the principal may describe: filter, pages of 50, and the
 * publish rate of each (its growth between two refreshes; consume rates
 * are on the Rates page, which reads the node's counters). */
export function Topics() {
  const topics = usePoll(() => api<{ topics: Topic[] }>('GET', '/v1/topics'), [], 5000);
  const growth = useGrowth(topics.data?.topics);
  const [filter, setFilter] = useState('');
  const [creating, setCreating] = useState(false);
  const list = useMemo(() => {
    const f = filter.trim().toLowerCase();
    const all = topics.data?.topics ?? [];
    return f ? all.filter((t) => t.name.toLowerCase().includes(f)) : all;
  }, [topics.data, filter]);
  const { rows, pager } = usePage(list, pageSize, filter);

  return (
    <section aria-labelledby="h-topics">
      <div class="title-row">
        <h1 id="h-topics">Topics</h1>
        <button type="button" class="primary" onClick={() => setCreating(true)}>
          Create topic
        </button>
      </div>
      <ErrorBox error={topics.error} />
      <div class="toolbar">
        <Field label="Filter by name">
          <input type="search" name="filter" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} placeholder="orders" />
        </Field>
      </div>
      {!topics.data && !topics.error && <p>Loading…</p>}
      {topics.data && (
        <>
          <table aria-label="Topics">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col" class="num">Partitions</th>
                <th scope="col" class="num">Replicas</th>
                <th scope="col">Mode</th>
                <th scope="col">Retention</th>
                <th scope="col" class="num">Records</th>
                <th scope="col" class="num">Size</th>
                <th scope="col" class="num">Publish rate</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((t) => {
                const records = t.partitions.reduce((s, p) => s + (p.end_offset - p.start_offset), 0);
                const size = t.partitions.reduce((s, p) => s + p.size_bytes, 0);
                return (
                  <tr key={t.name}>
                    <td>
                      <a href={link('/topics/' + encodeURIComponent(t.name))}>{t.name}</a>
                    </td>
                    <td class="num">{t.config.partitions}</td>
                    <td class="num">{t.config.replication_factor}</td>
                    <td>{t.config.default_mode}</td>
                    <td>{fmtMs(t.config.retention_ms)}</td>
                    <td class="num">{fmtNum(records)}</td>
                    <td class="num">{fmtBytes(size)}</td>
                    <td class="num">{fmtRate(growth?.get(t.name))}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
          {list.length === 0 && <p>No topics{filter ? ' match the filter' : ''}.</p>}
          {pager}
          <p class="hint">Publish rates: records appended between two refreshes (every 5 s); consume rates are under Rates.</p>
        </>
      )}
      {creating && (
        <CreateTopic
          onClose={() => setCreating(false)}
          onCreated={(name) => {
            setCreating(false);
            location.hash = '#/topics/' + encodeURIComponent(name);
          }}
        />
      )}
    </section>
  );
}

function CreateTopic(props: { onClose: () => void; onCreated: (name: string) => void }) {
  const [name, setName] = useState('');
  const [partitions, setPartitions] = useState('1');
  const [rf, setRf] = useState('0');
  const [retentionH, setRetentionH] = useState('');
  const [mode, setMode] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      const body: Record<string, unknown> = { name: name.trim(), partitions: Number(partitions) };
      if (Number(rf) > 0) body.replication_factor = Number(rf);
      if (retentionH.trim()) body.retention_ms = Math.round(Number(retentionH) * 3_600_000);
      if (mode) body.default_mode = mode;
      await api('POST', '/v1/topics', body);
      props.onCreated(name.trim());
    } catch (err) {
      setError(errText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Dialog title="Create topic" onClose={props.onClose}>
      <form onSubmit={submit}>
        <Field label="Name" hint="1 to 249 characters of a-z, A-Z, 0-9, dot, underscore and hyphen">
          <input name="name" required pattern="[a-zA-Z0-9._\-]{1,249}" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field label="Partitions">
          <input name="partitions" type="number" min="1" required value={partitions} onInput={(e) => setPartitions(e.currentTarget.value)} />
        </Field>
        <Field label="Replication factor" hint="0: the cluster's default">
          <input name="replication_factor" type="number" min="0" value={rf} onInput={(e) => setRf(e.currentTarget.value)} />
        </Field>
        <Field label="Retention (hours)" hint="empty: the default">
          <input name="retention_hours" type="number" min="0" step="any" value={retentionH} onInput={(e) => setRetentionH(e.currentTarget.value)} />
        </Field>
        <Field label="Default delivery mode">
          <select name="default_mode" value={mode} onChange={(e) => setMode(e.currentTarget.value)}>
            <option value="">default</option>
            <option value="consistent">consistent</option>
            <option value="eventual">eventual</option>
            <option value="performance">performance</option>
          </select>
        </Field>
        <ErrorBox error={error} />
        <div class="actions">
          <button type="button" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={busy}>
            Create
          </button>
        </div>
      </form>
    </Dialog>
  );
}
