// One consumer group: members and their assignments, committed offsets and lag per partition,
// and total lag over time. A share group (KIP-932) shows its share-partition start offsets in
// place of committed offsets (lag: records not yet acknowledged or archived, in flight
// included), and its reset moves those start offsets. The page polls GET /api/groups/<id> every 5 s; the lag series is
// kept in sessionStorage per group (≤ LAG_POINTS_MAX), so leaving and coming back keeps it.
// Action: reset the group's offsets (the broker refuses unless the group has no members).
import { useMemo, useRef, useState } from '../vendor/hooks.module.js';
import { html } from '../ui/html.js';
import { enc } from '../api.js';
import { useApi } from '../ui/use_api.js';
import { useReady } from '../ui/ready.js';
import { useAction } from '../ui/action.js';
import { Table } from '../ui/table.js';
import { Chart } from '../ui/chart.js';
import { formatCount, formatTopicPartitions } from '../ui/format.js';
import { ErrorBox, Panel, Stat } from './parts.js';

const POLL_MS = 5000;
const LAG_POINTS_MAX = 720;

const MEMBER_COLUMNS = [
  { id: 'member', label: 'Member', value: (m) => m.member_id, testid: 'member-id' },
  { id: 'client', label: 'Client', value: (m) => m.client_id, testid: 'member-client' },
  { id: 'host', label: 'Host', value: (m) => m.host },
  { id: 'instance', label: 'Instance', value: (m) => m.instance_id ?? '' },
  { id: 'assignment', label: 'Assignment', value: (m) => formatTopicPartitions(m.assignment), testid: 'member-assignment' },
];

const offsetColumns = (share) => [
  { id: 'topic', label: 'Topic', value: (o) => o.topic, cell: (o) => html`<a href=${`#/topics/${enc(o.topic)}`}>${o.topic}</a>` },
  { id: 'partition', label: 'Partition', value: (o) => o.partition, numeric: true },
  { id: 'committed', label: share ? 'Start offset' : 'Committed', value: (o) => o.committed, testid: 'offset-committed', numeric: true },
  { id: 'end', label: 'End', value: (o) => o.end, testid: 'offset-end', numeric: true },
  { id: 'lag', label: 'Lag', value: (o) => o.lag, testid: 'offset-lag', numeric: true },
  ...(share ? [] : [{ id: 'metadata', label: 'Metadata', value: (o) => o.metadata ?? '' }]),
];
const OFFSET_COLUMNS = offsetColumns(false);
const SHARE_OFFSET_COLUMNS = offsetColumns(true);

const totalLag = (offsets) => (offsets || []).reduce((sum, o) => sum + (o.lag ?? 0), 0);

// Appends the current total lag to the group's stored series once per answer.
function useLagSeries(groupId, data) {
  const key = `strata:lag:${groupId}`;
  const lastRef = useRef(null);
  return useMemo(() => {
    let points = [];
    try {
      points = JSON.parse(sessionStorage.getItem(key) || '[]');
    } catch {
      points = [];
    }
    if (data && lastRef.current !== data) {
      lastRef.current = data;
      points.push([Math.floor(Date.now() / 1000), totalLag(data.offsets)]);
      points = points.slice(-LAG_POINTS_MAX);
      sessionStorage.setItem(key, JSON.stringify(points));
    }
    return [points.map((p) => p[0]), points.map((p) => p[1])];
  }, [key, data]);
}

function ResetOffsetsForm({ group, topics, run, share }) {
  const [to, setTo] = useState('earliest');
  const [value, setValue] = useState('');
  const [topic, setTopic] = useState('');
  const needsValue = to === 'offset' || to === 'timestamp';
  const submit = (e) => {
    e.preventDefault();
    let number = null;
    if (needsValue) {
      const raw = value.trim();
      number = /^-?\d+$/.test(raw) ? Number(raw) : to === 'timestamp' ? Date.parse(raw) : NaN;
    }
    const which = topic.trim() ? `topic "${topic.trim()}"` : `all its topics (${topics.join(', ') || 'none committed'})`;
    const target = to === 'offset' ? `offset ${number}` : to === 'timestamp' ? `the first offset at or after ${new Date(number).toISOString()} (${number} ms)` : `the ${to} offset`;
    const what = share ? `the share-partition start offsets of share group "${group}"` : `the committed offsets of group "${group}"`;
    const after = share ? ' The next member starts there, with nothing in flight.' : '';
    run({
      title: 'Reset offsets',
      effect: `Reset ${what} for ${which} to ${target} of each partition (clamped to the log start and end). The broker refuses while the group has members.${after}`,
      path: `/api/groups/${enc(group)}/offsets`,
      body: { topic: topic.trim() || null, to, value: number },
    });
  };
  return html`
    <form class="form-grid" onSubmit=${submit}>
      <label>To
        <select data-testid="reset-offsets-to" value=${to} onChange=${(e) => setTo(e.currentTarget.value)}>
          <option value="earliest">earliest</option>
          <option value="latest">latest</option>
          <option value="offset">offset</option>
          <option value="timestamp">timestamp</option>
        </select>
      </label>
      <label>Value (offset, or time in ms or ISO) <input data-testid="reset-offsets-value" value=${value} required=${needsValue} onInput=${(e) => setValue(e.currentTarget.value)} /></label>
      <label>Topic (empty: all) <input data-testid="reset-offsets-topic" list="group-topics" value=${topic} onInput=${(e) => setTopic(e.currentTarget.value)} /></label>
      <datalist id="group-topics">${topics.map((t) => html`<option key=${t} value=${t} />`)}</datalist>
      <div class="wide"><button type="submit" class="danger" data-testid="reset-offsets-submit">Reset…</button></div>
    </form>`;
}

export function GroupPage({ id }) {
  const { data, error, settled, reload } = useApi(`/api/groups/${enc(id)}`, POLL_MS);
  const [resetting, setResetting] = useState(false);
  const { run, dialog, result } = useAction(reload);
  const lag = useLagSeries(id, data);
  useReady('group', settled, data || error);
  const topics = useMemo(() => [...new Set((data?.offsets || []).map((o) => o.topic))].sort(), [data]);
  const share = data?.type === 'share';

  return html`
    <div class="page">
      <h1><a href="#/groups">Consumer groups</a> / ${id}
        <button type="button" class="right" data-testid="reset-offsets-open" onClick=${() => setResetting(!resetting)}>Reset offsets</button>
      </h1>
      <${ErrorBox} error=${error} />
      <${Panel} open=${resetting}>
        ${data && data.members.length > 0 && html`<p class="warn">The group has ${data.members.length} member(s): stop its consumers first.</p>`}
        <${ResetOffsetsForm} group=${id} topics=${topics} run=${run} share=${share} />
      <//>
      ${result}
      ${data && html`
        <div class="stats">
          <${Stat} label="State" testid="group-state" value=${data.state} />
          <${Stat} label="Type" value=${data.type} />
          <${Stat} label="Protocol" value=${`${data.protocol_type || '—'} / ${data.protocol || '—'}`} />
          <${Stat} label="Epoch" value=${data.epoch} />
          <${Stat} label="Coordinator" value=${data.coordinator} />
          <${Stat} label="Total lag" testid="group-total-lag" value=${formatCount(totalLag(data.offsets))} />
        </div>
        <section>
          <h2>Lag over time</h2>
          <${Chart} testid="lag-chart" series=${[{ label: 'lag' }]} data=${lag} format=${formatCount} />
        </section>
        <section>
          <h2>Members</h2>
          <${Table} columns=${MEMBER_COLUMNS} rows=${data.members} rowKey=${(m) => m.member_id}
            rowAttrs=${(m) => ({ 'data-testid': 'member-row', 'data-member': m.member_id })}
            filterable=${data.members.length > 20} empty="No members." />
        </section>
        <section>
          <h2>${share ? 'Share-partition start offsets' : 'Committed offsets'}</h2>
          <${Table} columns=${share ? SHARE_OFFSET_COLUMNS : OFFSET_COLUMNS} rows=${data.offsets} rowKey=${(o) => `${o.topic}\u0000${o.partition}`}
            rowAttrs=${(o) => ({ 'data-testid': 'offset-row', 'data-topic': o.topic, 'data-partition': o.partition })}
            initialSort=${{ id: 'topic', descending: false }} empty=${share ? 'No share-partition state.' : 'No committed offsets.'} />
        </section>`}
      ${dialog}
    </div>`;
}
