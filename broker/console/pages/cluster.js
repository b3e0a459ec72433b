// Cluster: brokers (live, fenced, controller), the KRaft controller quorum and partition
// health, from GET /api/cluster every 5 s.
import { html } from '../ui/html.js';
import { useApi } from '../ui/use_api.js';
import { useReady } from '../ui/ready.js';
import { Table } from '../ui/table.js';
import { ErrorBox, Stat } from './parts.js';

const BROKER_COLUMNS = [
  { id: 'id', label: 'Id', value: (b) => b.id, testid: 'broker-id', numeric: true },
  { id: 'host', label: 'Host', value: (b) => `${b.host}:${b.port}`, testid: 'broker-host' },
  { id: 'rack', label: 'Rack', value: (b) => b.rack ?? '' },
  {
    id: 'state', label: 'State', value: (b) => b.state, testid: 'broker-state',
    cell: (b) => html`<span class=${`badge ${b.state === 'live' ? 'good' : 'bad'}`}>${b.state}</span>`,
  },
  { id: 'controller', label: 'Controller', value: (b) => (b.controller ? 'yes' : ''), testid: 'broker-controller' },
];

const VOTER_COLUMNS = [
  { id: 'id', label: 'Voter', value: (v) => v.id, numeric: true },
  { id: 'leo', label: 'Log end offset', value: (v) => v.log_end_offset, numeric: true },
  { id: 'lag', label: 'Lag', value: (v) => v.lag, numeric: true },
];

function Quorum({ quorum, error }) {
  if (!quorum) return html`<p class="muted">Quorum hidden: ${error || 'not available'}</p>`;
  const members = [
    ...quorum.voters.map((v) => ({ ...v, role: 'voter' })),
    ...(quorum.observers || []).map((v) => ({ ...v, role: 'observer' })),
  ];
  const columns = [{ id: 'role', label: 'Role', value: (v) => v.role }, ...VOTER_COLUMNS];
  return html`
    <div class="stats">
      <${Stat} label="Leader" testid="quorum-leader" value=${quorum.leader_id} />
      <${Stat} label="Leader epoch" value=${quorum.leader_epoch} />
      <${Stat} label="High watermark" value=${quorum.high_watermark} />
    </div>
    <${Table} columns=${columns} rows=${members} rowKey=${(v) => `${v.role}-${v.id}`} filterable=${false} />`;
}

export function ClusterPage() {
  const { data, error, settled } = useApi('/api/cluster', 5000);
  useReady('cluster', settled, data || error);
  if (!data) return html`<div class="page"><h1>Cluster</h1><${ErrorBox} error=${error} /></div>`;
  const health = data.health;
  return html`
    <div class="page">
      <h1>Cluster <span class="muted small">${data.cluster_id}</span></h1>
      <${ErrorBox} error=${error} />
      <section>
        <h2>Health <span class=${`badge ${health.healthy ? 'good' : 'bad'}`}>${health.healthy ? 'healthy' : 'degraded'}</span></h2>
        <div class="stats">
          <${Stat} label="Controller" testid="cluster-controller" value=${data.controller_id} />
          <${Stat} label="Topics" testid="health-topics" value=${health.topics} />
          <${Stat} label="Partitions" testid="health-partitions" value=${health.partitions} />
          <${Stat} label="Offline" testid="health-offline" value=${health.offline} bad=${health.offline > 0} />
          <${Stat} label="Leaderless" testid="health-leaderless" value=${health.leaderless} bad=${health.leaderless > 0} />
          <${Stat} label="Under-replicated" testid="health-under-replicated" value=${health.under_replicated} bad=${health.under_replicated > 0} />
        </div>
      </section>
      <section>
        <h2>Brokers</h2>
        <${Table} columns=${BROKER_COLUMNS} rows=${data.brokers} rowKey=${(b) => b.id}
          rowAttrs=${(b) => ({ 'data-testid': 'broker-row', 'data-broker-id': b.id })} filterable=${false} />
      </section>
      <section>
        <h2>Controller quorum</h2>
        <${Quorum} quorum=${data.quorum} error=${data.quorum_error} />
      </section>
    </div>`;
}
