import { useMemo, useState } from 'preact/hooks';
import { api, enc, Placement, Topic } from '../api';
import { Dialog, ErrorBox, errText, Field, fmtBytes, fmtMs, fmtNum, fmtRate, link, Notice, useGrowth, usePage, usePoll } from '../ui';

/** One topic: configuration (alter), partitions with leader, replicas,
 * offsets and size, rates, and delete. */
export function TopicDetail(props: { name: string }) {
  const path = '/v1/topics/' + enc(props.name);
  const topic = usePoll(() => api<Topic>('GET', path), [props.name], 5000);
  const placement = usePoll(
    () => api<{ partitions: Placement[] }>('GET', path + '/placement').catch(() => ({ partitions: [] as Placement[] })),
    [props.name],
    10000,
  );
  const [editing, setEditing] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const [notice, setNotice] = useState('');
  const t = topic.data;
  const byPartition = new Map((placement.data?.partitions ?? []).map((p) => [p.partition, p]));
  const { rows, pager } = usePage(t?.partitions ?? [], 100, props.name);
  const growth = useGrowth(useMemo(() => (t ? [t] : undefined), [t]));

  return (
    <section aria-labelledby="h-topic">
      <p class="crumbs">
        <a href={link('/topics')}>Topics</a> /
      </p>
      <div class="title-row">
        <h1 id="h-topic">{props.name}</h1>
        <a class="button" href={link('/messages?topic=' + enc(props.name))}>
          Browse messages
        </a>
        <button type="button" onClick={() => setEditing(true)} disabled={!t}>
          Configure
        </button>
        <button type="button" class="danger" onClick={() => setDeleting(true)} disabled={!t}>
          Delete
        </button>
      </div>
      <ErrorBox error={topic.error} />
      <Notice text={notice} />
      {t && (
        <>
          <dl class="config">
            <dt>Partitions</dt>
            <dd>{t.config.partitions}</dd>
            <dt>Replication factor</dt>
            <dd>{t.config.replication_factor}</dd>
            <dt>Default mode</dt>
            <dd>{t.config.default_mode}</dd>
            <dt>Retention</dt>
            <dd>{fmtMs(t.config.retention_ms)}</dd>
            <dt>Retention bytes</dt>
            <dd>{t.config.retention_bytes > 0 ? fmtBytes(t.config.retention_bytes) : 'none'}</dd>
            <dt>Max message size</dt>
            <dd>{fmtBytes(t.config.max_message_bytes)}</dd>
            <dt>Segment size</dt>
            <dd>{fmtBytes(t.config.segment_bytes)}</dd>
            <dt>Publish rate</dt>
            <dd>{fmtRate(growth?.get(t.name))}</dd>
            <dt>Rates over time</dt>
            <dd>
              <a href={link('/rates?topic=' + enc(t.name))}>chart</a>
            </dd>
          </dl>
          <h2>Partitions</h2>
          <table aria-label="Partitions">
            <thead>
              <tr>
                <th scope="col" class="num">Partition</th>
                <th scope="col">Leader</th>
                <th scope="col">Replicas</th>
                <th scope="col" class="num">Start offset</th>
                <th scope="col" class="num">End offset</th>
                <th scope="col" class="num">Records</th>
                <th scope="col" class="num">Size</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((p) => {
                const pl = byPartition.get(p.partition);
                return (
                  <tr key={p.partition}>
                    <td class="num">{p.partition}</td>
                    <td>{pl ? pl.leader || (pl.local ? 'none' : 'unknown here') : '—'}</td>
                    <td>{pl ? pl.replicas.join(', ') : '—'}</td>
                    <td class="num">{fmtNum(p.start_offset)}</td>
                    <td class="num">{fmtNum(p.end_offset)}</td>
                    <td class="num">{fmtNum(p.end_offset - p.start_offset)}</td>
                    <td class="num">{fmtBytes(p.size_bytes)}</td>
                    <td>
                      <a href={link(`/messages?topic=${enc(t.name)}&partition=${p.partition}`)}>Messages</a>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
          {pager}
        </>
      )}
      {editing && t && (
        <Configure
          topic={t}
          onClose={() => setEditing(false)}
          onDone={() => {
            setEditing(false);
            setNotice('Configuration changed.');
            topic.reload();
          }}
        />
      )}
      {deleting && t && (
        <DeleteTopic
          name={t.name}
          onClose={() => setDeleting(false)}
          onDone={() => {
            location.hash = '#/topics';
          }}
        />
      )}
    </section>
  );
}

function Configure(props: { topic: Topic; onClose: () => void; onDone: () => void }) {
  const c = props.topic.config;
  const [partitions, setPartitions] = useState(String(c.partitions));
  const [retentionMs, setRetentionMs] = useState(String(c.retention_ms));
  const [retentionBytes, setRetentionBytes] = useState(String(c.retention_bytes));
  const [maxMessage, setMaxMessage] = useState(String(c.max_message_bytes));
  const [mode, setMode] = useState(c.default_mode);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = {};
    if (Number(partitions) !== c.partitions) body.partitions = Number(partitions);
    if (Number(retentionMs) !== c.retention_ms) body.retention_ms = Number(retentionMs);
    if (Number(retentionBytes) !== c.retention_bytes) body.retention_bytes = Number(retentionBytes);
    if (Number(maxMessage) !== c.max_message_bytes) body.max_message_bytes = Number(maxMessage);
    if (mode !== c.default_mode) body.default_mode = mode;
    if (Object.keys(body).length === 0) {
      props.onClose();
      return;
    }
    setBusy(true);
    setError('');
    try {
      await api('PATCH', '/v1/topics/' + enc(props.topic.name), body);
      props.onDone();
    } catch (err) {
      setError(errText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Dialog title={`Configure ${props.topic.name}`} onClose={props.onClose}>
      <form onSubmit={submit}>
        <Field label="Partitions" hint="can only grow">
          <input name="partitions" type="number" min={c.partitions} value={partitions} onInput={(e) => setPartitions(e.currentTarget.value)} />
        </Field>
        <Field label="Retention (ms)" hint="0: keep records regardless of age">
          <input name="retention_ms" type="number" min="0" value={retentionMs} onInput={(e) => setRetentionMs(e.currentTarget.value)} />
        </Field>
        <Field label="Retention (bytes per partition)" hint="0: no size limit">
          <input name="retention_bytes" type="number" min="0" value={retentionBytes} onInput={(e) => setRetentionBytes(e.currentTarget.value)} />
        </Field>
        <Field label="Max message size (bytes)">
          <input name="max_message_bytes" type="number" min="1" value={maxMessage} onInput={(e) => setMaxMessage(e.currentTarget.value)} />
        </Field>
        <Field label="Default delivery mode">
          <select name="default_mode" value={mode} onChange={(e) => setMode(e.currentTarget.value)}>
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
            Apply
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function DeleteTopic(props: { name: string; onClose: () => void; onDone: () => void }) {
  const [typed, setTyped] = useState('');
  const [error, setError] = useState('');
  const submit = async (e: Event) => {
    e.preventDefault();
    try {
      await api('DELETE', '/v1/topics/' + enc(props.name));
      props.onDone();
    } catch (err) {
      setError(errText(err));
    }
  };
  return (
    <Dialog title={`Delete ${props.name}`} onClose={props.onClose}>
      <form onSubmit={submit}>
        <p>This deletes the topic, all its records and its groups' committed offsets, on every node. It cannot be undone.</p>
        <Field label="Type the topic's name to confirm">
          <input name="confirm" autocomplete="off" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} />
        </Field>
        <ErrorBox error={error} />
        <div class="actions">
          <button type="button" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" class="danger" disabled={typed !== props.name}>
            Delete topic
          </button>
        </div>
      </form>
    </Dialog>
  );
}
