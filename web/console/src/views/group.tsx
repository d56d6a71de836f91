import { useMemo, useState } from 'preact/hooks';
import { api, enc, Group, Topic } from '../api';
import { Dialog, ErrorBox, errText, Field, fmtNum, link, Notice, Stat, usePage, usePoll } from '../ui';

/** One group: members, assignment, committed offset and lag per
 * partition; reset its offsets; delete it. */
export function GroupDetail(props: { name: string }) {
  const path = '/v1/groups/' + enc(props.name);
  const group = usePoll(() => api<Group>('GET', path), [props.name], 5000);
  const [resetting, setResetting] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const [notice, setNotice] = useState('');
  const g = group.data;
  const { rows, pager } = usePage(g?.partitions ?? [], 100, props.name);
  const totalLag = (g?.partitions ?? []).reduce((s, p) => s + p.lag, 0);
  const topics = useMemo(() => [...new Set((g?.partitions ?? []).map((p) => p.topic))].sort(), [g]);

  return (
    <section aria-labelledby="h-group">
      <p class="crumbs">
        <a href={link('/groups')}>Groups</a> /
      </p>
      <div class="title-row">
        <h1 id="h-group">{props.name}</h1>
        <button type="button" class="primary" disabled={!g || topics.length === 0} onClick={() => setResetting(true)}>
          Reset offsets
        </button>
        <button type="button" class="danger" disabled={!g} onClick={() => setDeleting(true)}>
          Delete group
        </button>
      </div>
      <ErrorBox error={group.error} />
      <Notice text={notice} />
      {g && (
        <>
          <div class="stats">
            <Stat label="live members" value={g.members.length} />
            <Stat label="generation" value={g.generation} />
            <Stat label="total lag" value={fmtNum(totalLag)} tone={totalLag > 0 ? undefined : 'ok'} />
          </div>
          <h2>Members</h2>
          {g.members.length === 0 ? (
            <p>No live members.</p>
          ) : (
            <table aria-label="Members">
              <thead>
                <tr>
                  <th scope="col">Member</th>
                  <th scope="col">Client</th>
                  <th scope="col">Topic</th>
                  <th scope="col">Partitions</th>
                </tr>
              </thead>
              <tbody>
                {g.members.map((m) => (
                  <tr key={m.member_id}>
                    <td>{m.member_id}</td>
                    <td>{m.client_id || '—'}</td>
                    <td>{m.topic}</td>
                    <td>{m.partitions.join(', ') || 'none'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <h2>Partitions</h2>
          <table aria-label="Group partitions">
            <thead>
              <tr>
                <th scope="col">Topic</th>
                <th scope="col" class="num">Partition</th>
                <th scope="col" class="num">Committed</th>
                <th scope="col" class="num">End offset</th>
                <th scope="col" class="num">Lag</th>
                <th scope="col">Owner</th>
                <th scope="col" class="num">Pending acks</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((p) => (
                <tr key={p.topic + '/' + p.partition} data-topic={p.topic} data-partition={p.partition}>
                  <td>
                    <a href={link('/topics/' + enc(p.topic))}>{p.topic}</a>
                  </td>
                  <td class="num">{p.partition}</td>
                  <td class="num committed">{p.committed < 0 ? 'none' : fmtNum(p.committed)}</td>
                  <td class="num">{fmtNum(p.high_watermark)}</td>
                  <td class="num">{fmtNum(p.lag)}</td>
                  <td>{p.owner || '—'}</td>
                  <td class="num">{p.pending_acks}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {pager}
        </>
      )}
      {resetting && g && (
        <ResetOffsets
          group={g}
          topics={topics}
          onClose={() => setResetting(false)}
          onDone={(n) => {
            setResetting(false);
            setNotice(`Committed ${n} new offset${n === 1 ? '' : 's'}.`);
            group.reload();
          }}
        />
      )}
      {deleting && (
        <DeleteGroup
          name={props.name}
          onClose={() => setDeleting(false)}
          onDone={() => {
            location.hash = '#/groups';
          }}
        />
      )}
    </section>
  );
}

type Target = 'earliest' | 'latest' | 'timestamp' | 'offset';

interface Plan {
  topic: string;
  partition: number;
  current: number;
  next: number;
  note: string;
}

/** Reset offsets: a preview of the new offsets, then one administrative
 * commit of them (POST /v1/groups/{group}/commits without a member),
 * which the broker refuses for partitions a live member owns. */
function ResetOffsets(props: { group: Group; topics: string[]; onClose: () => void; onDone: (n: number) => void }) {
  const [topic, setTopic] = useState(props.topics[0] ?? '');
  const [parts, setParts] = useState('');
  const [to, setTo] = useState<Target>('earliest');
  const [time, setTime] = useState('');
  const [offset, setOffset] = useState('0');
  const [plan, setPlan] = useState<Plan[] | null>(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);

  const preview = async (e: Event) => {
    e.preventDefault();
    setError('');
    setPlan(null);
    setBusy(true);
    try {
      const t = await api<Topic>('GET', '/v1/topics/' + enc(topic));
      let wanted = t.partitions.map((p) => p.partition);
      if (parts.trim()) {
        const named = parts.split(',').map((s) => Number(s.trim()));
        if (named.some((n) => !Number.isInteger(n) || n < 0 || n >= t.partitions.length)) throw new Error(`partitions must be 0 to ${t.partitions.length - 1}`);
        wanted = named;
      }
      const ms = to === 'timestamp' ? new Date(time).getTime() : 0;
      if (to === 'timestamp' && !Number.isFinite(ms)) throw new Error('choose a date and time');
      const out: Plan[] = [];
      for (const n of wanted) {
        const p = t.partitions.find((x) => x.partition === n)!;
        const cur = props.group.partitions.find((x) => x.topic === topic && x.partition === n)?.committed ?? -1;
        let next: number;
        let note = '';
        switch (to) {
          case 'earliest':
            next = p.start_offset;
            break;
          case 'latest':
            next = p.end_offset;
            break;
          case 'timestamp':
            next = (await api<{ offset: number }>('GET', `/v1/topics/${enc(topic)}/partitions/${n}/offset?timestamp_ms=${Math.max(0, ms)}`)).offset;
            break;
          default:
            next = Number(offset);
            if (next < p.start_offset || next > p.end_offset) {
              note = `clamped to ${next < p.start_offset ? 'the start' : 'the end'}`;
              next = Math.max(p.start_offset, Math.min(next, p.end_offset));
            }
        }
        out.push({ topic, partition: n, current: cur, next, note });
      }
      setPlan(out);
    } catch (err) {
      setError(errText(err));
    } finally {
      setBusy(false);
    }
  };

  const apply = async () => {
    if (!plan) return;
    setBusy(true);
    setError('');
    try {
      await api('POST', `/v1/groups/${enc(props.group.group)}/commits`, {
        offsets: plan.map((p) => ({ topic: p.topic, partition: p.partition, offset: p.next })),
      });
      props.onDone(plan.length);
    } catch (err) {
      setError(errText(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Dialog title={`Reset offsets of ${props.group.group}`} onClose={props.onClose}>
      <form onSubmit={preview} onInput={() => setPlan(null)}>
        <Field label="Topic">
          <select name="topic" value={topic} onChange={(e) => setTopic(e.currentTarget.value)}>
            {props.topics.map((t) => (
              <option value={t}>{t}</option>
            ))}
          </select>
        </Field>
        <Field label="Partitions" hint="comma-separated; empty: all">
          <input name="partitions" value={parts} onInput={(e) => setParts(e.currentTarget.value)} placeholder="all" />
        </Field>
        <Field label="Reset to">
          <select name="to" value={to} onChange={(e) => setTo(e.currentTarget.value as Target)}>
            <option value="earliest">earliest (the start of each partition)</option>
            <option value="latest">latest (the end: skip everything)</option>
            <option value="timestamp">a time</option>
            <option value="offset">an offset</option>
          </select>
        </Field>
        {to === 'timestamp' && (
          <Field label="Time (local)">
            <input name="time" type="datetime-local" step="1" required value={time} onInput={(e) => setTime(e.currentTarget.value)} />
          </Field>
        )}
        {to === 'offset' && (
          <Field label="Offset">
            <input name="offset" type="number" min="0" required value={offset} onInput={(e) => setOffset(e.currentTarget.value)} />
          </Field>
        )}
        <ErrorBox error={error} />
        {plan && (
          <table aria-label="New offsets">
            <thead>
              <tr>
                <th scope="col" class="num">Partition</th>
                <th scope="col" class="num">Committed now</th>
                <th scope="col" class="num">New offset</th>
                <th scope="col">Note</th>
              </tr>
            </thead>
            <tbody>
              {plan.map((p) => (
                <tr key={p.partition}>
                  <td class="num">{p.partition}</td>
                  <td class="num">{p.current < 0 ? 'none' : fmtNum(p.current)}</td>
                  <td class="num">{fmtNum(p.next)}</td>
                  <td>{p.note}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <div class="actions">
          <button type="button" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" disabled={busy || !topic}>
            Preview
          </button>
          <button type="button" class="primary" disabled={busy || !plan} onClick={apply}>
            Apply
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function DeleteGroup(props: { name: string; onClose: () => void; onDone: () => void }) {
  const [error, setError] = useState('');
  return (
    <Dialog title={`Delete ${props.name}`} onClose={props.onClose}>
      <p>This forgets the group's committed offsets. It is refused while the group has live members.</p>
      <ErrorBox error={error} />
      <div class="actions">
        <button type="button" onClick={props.onClose}>
          Cancel
        </button>
        <button
          type="button"
          class="danger"
          onClick={async () => {
            try {
              await api('DELETE', '/v1/groups/' + enc(props.name));
              props.onDone();
            } catch (e) {
              setError(errText(e));
            }
          }}
        >
          Delete group
        </button>
      </div>
    </Dialog>
  );
}
