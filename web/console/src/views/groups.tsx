import { useMemo, useState } from 'preact/hooks';
import { api, GroupSummary } from '../api';
import { ErrorBox, Field, link, usePage, usePoll } from '../ui';

/** Consumer groups the principal may describe: filter and pages of 50.
 * Lag is on each group's page (describing every group of a large
 * cluster on each refresh would cost a request per group). */
export function Groups() {
  const groups = usePoll(() => api<{ groups: GroupSummary[] }>('GET', '/v1/groups'), [], 10000);
  const [filter, setFilter] = useState('');
  const list = useMemo(() => {
    const f = filter.trim().toLowerCase();
    const all = [...(groups.data?.groups ?? [])].sort((a, b) => a.group.localeCompare(b.group));
    return f ? all.filter((g) => g.group.toLowerCase().includes(f) || g.topics.some((t) => t.toLowerCase().includes(f))) : all;
  }, [groups.data, filter]);
  const { rows, pager } = usePage(list, 50, filter);
  return (
    <section aria-labelledby="h-groups">
      <h1 id="h-groups">Consumer groups</h1>
      <ErrorBox error={groups.error} />
      <div class="toolbar">
        <Field label="Filter by group or topic">
          <input type="search" name="filter" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} />
        </Field>
      </div>
      {!groups.data && !groups.error && <p>Loading…</p>}
      {groups.data && (
        <>
          <table aria-label="Groups">
            <thead>
              <tr>
                <th scope="col">Group</th>
                <th scope="col" class="num">Live members</th>
                <th scope="col">Topics</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((g) => (
                <tr key={g.group}>
                  <td>
                    <a href={link('/groups/' + encodeURIComponent(g.group))}>{g.group}</a>
                  </td>
                  <td class="num">{g.members}</td>
                  <td>{g.topics.join(', ')}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {list.length === 0 && <p>No groups{filter ? ' match the filter' : ''}.</p>}
          {pager}
        </>
      )}
    </section>
  );
}
