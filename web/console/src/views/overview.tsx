import { api, ApiError, ClusterNode, ClusterStatus, text } from '../api';
import { ErrorBox, fmtNum, link, Stat, usePage, usePoll } from '../ui';

interface ClusterJSON {
  node_id: string;
  nodes: ClusterNode[];
}

/** The cluster: nodes, health, the metadata leader, partition leaders and
 * the partitions that need attention. */
export function Overview() {
  const cluster = usePoll(() => api<ClusterJSON>('GET', '/v1/cluster'), [], 5000);
  const ready = usePoll(() => text('/readyz'), [], 5000);
  const status = usePoll(
    async () => {
      try {
        return { st: await api<ClusterStatus>('GET', '/v1/cluster/status'), denied: false };
      } catch (e) {
        if (e instanceof ApiError && e.status === 403) return { st: undefined, denied: true };
        throw e;
      }
    },
    [],
    5000,
  );
  const st = status.data?.st;
  const problems = (st?.partitions ?? []).filter((p) => p.leaderless || p.under_replicated);
  const { rows, pager } = usePage(problems, 50, problems.length);
  const leaders = new Map<string, number>();
  for (const p of st?.partitions ?? []) if (p.leader) leaders.set(p.leader, (leaders.get(p.leader) ?? 0) + 1);

  return (
    <section aria-labelledby="h-overview">
      <h1 id="h-overview">Cluster</h1>
      <ErrorBox error={cluster.error || status.error} />
      <div class="stats">
        <Stat
          label="this node"
          value={ready.data ? (ready.data.ok ? 'ready' : 'not ready') : '…'}
          tone={ready.data ? (ready.data.ok ? 'ok' : 'bad') : undefined}
        />
        <Stat label="nodes" value={st ? st.nodes.length : cluster.data ? cluster.data.nodes.length : '…'} />
        <Stat label="metadata leader" value={st ? st.metadata_leader || 'none' : '…'} tone={st && !st.metadata_leader ? 'bad' : undefined} />
        <Stat label="partitions" value={st ? fmtNum(st.partitions.length) : '…'} />
        <Stat label="leaderless" value={st ? st.leaderless : '…'} tone={st ? (st.leaderless ? 'bad' : 'ok') : undefined} />
        <Stat label="under-replicated" value={st ? st.under_replicated : '…'} tone={st ? (st.under_replicated ? 'bad' : 'ok') : undefined} />
      </div>
      {ready.data && !ready.data.ok && <p class="error">Not ready: {ready.data.body.trim()}</p>}
      {status.data?.denied && <p class="notice">Your principal may not describe the cluster: partition leaders and replication state are not shown.</p>}

      <h2>Nodes</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">Node</th>
            <th scope="col">gRPC</th>
            <th scope="col">HTTP</th>
            <th scope="col">Kafka</th>
            <th scope="col">Role</th>
            <th scope="col">Partitions led</th>
          </tr>
        </thead>
        <tbody>
          {(st?.nodes ?? cluster.data?.nodes ?? []).map((n) => (
            <tr key={n.id}>
              <td>
                {n.id}
                {n.id === (st?.node_id ?? cluster.data?.node_id) && <span class="tag">this node</span>}
              </td>
              <td>{n.grpc || '—'}</td>
              <td>{n.http || '—'}</td>
              <td>{n.kafka || '—'}</td>
              <td>{st && n.id === st.metadata_leader ? 'metadata leader' : 'follower'}</td>
              <td>{st ? fmtNum(leaders.get(n.id) ?? 0) : '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>

      {st && (
        <>
          <h2>Partitions needing attention</h2>
          {problems.length === 0 ? (
            <p>None: every partition this node can see has a leader and its replicas in sync.</p>
          ) : (
            <>
              <table>
                <thead>
                  <tr>
                    <th scope="col">Topic</th>
                    <th scope="col">Partition</th>
                    <th scope="col">Leader</th>
                    <th scope="col">Replicas</th>
                    <th scope="col">Lag (Raft entries)</th>
                    <th scope="col">State</th>
                  </tr>
                </thead>
                <tbody>
                  {rows.map((p) => (
                    <tr key={p.topic + '/' + p.partition}>
                      <td>
                        <a href={link('/topics/' + encodeURIComponent(p.topic))}>{p.topic}</a>
                      </td>
                      <td>{p.partition}</td>
                      <td>{p.leader || 'none'}</td>
                      <td>{p.replicas.join(', ')}</td>
                      <td>
                        {p.lag
                          ? Object.entries(p.lag)
                              .map(([n, l]) => `${n}: ${l}`)
                              .join(', ')
                          : '—'}
                      </td>
                      <td class="bad">{p.leaderless ? 'leaderless' : 'under-replicated'}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
              {pager}
            </>
          )}
          <p class="hint">Leaders and lag are as this node sees them: a node knows the leader of the partitions it holds, and the lag of those it leads.</p>
        </>
      )}
    </section>
  );
}
