// Consumer groups: state, type, protocol, members, coordinator and current total lag,
// from GET /api/groups every 5 s. Brokers that did not answer ListGroups are named: the groups
// they coordinate are missing from the list.
import { html } from '../ui/html.js';
import { enc } from '../api.js';
import { useApi } from '../ui/use_api.js';
import { useReady } from '../ui/ready.js';
import { Table } from '../ui/table.js';
import { formatCount } from '../ui/format.js';
import { ErrorBox } from './parts.js';

const COLUMNS = [
  { id: 'group', label: 'Group', value: (g) => g.group_id, testid: 'group-id', cell: (g) => html`<a href=${`#/groups/${enc(g.group_id)}`}>${g.group_id}</a>` },
  { id: 'state', label: 'State', value: (g) => g.state, testid: 'group-state' },
  { id: 'type', label: 'Type', value: (g) => g.type, testid: 'group-type' },
  { id: 'protocol', label: 'Protocol', value: (g) => g.protocol ?? '' },
  { id: 'members', label: 'Members', value: (g) => g.members, testid: 'group-members', numeric: true },
  { id: 'coordinator', label: 'Coordinator', value: (g) => g.coordinator, numeric: true },
  { id: 'lag', label: 'Lag', value: (g) => g.lag, testid: 'group-lag', numeric: true, cell: (g) => formatCount(g.lag) },
];

export function GroupsPage() {
  const { data, error, settled } = useApi('/api/groups', 5000);
  useReady('groups', settled, data || error);
  return html`
    <div class="page">
      <h1>Consumer groups</h1>
      <${ErrorBox} error=${error} />
      ${data?.truncated && html`<p class="warn">The list is truncated: the broker answered only the first ${data.groups.length} groups.</p>`}
      ${data?.unanswered?.length > 0 && html`<p class="warn" data-testid="groups-unanswered">No answer from broker${data.unanswered.length > 1 ? 's' : ''} ${data.unanswered.join(', ')}: the groups ${data.unanswered.length > 1 ? 'they coordinate' : 'it coordinates'} are not listed.</p>`}
      ${data && html`<${Table} columns=${COLUMNS} rows=${data.groups} rowKey=${(g) => g.group_id}
        rowAttrs=${(g) => ({ 'data-testid': 'group-row', 'data-group': g.group_id })}
        initialSort=${{ id: 'group', descending: false }} empty="No consumer groups." />`}
    </div>`;
}
