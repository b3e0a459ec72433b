// Open transactions (Ongoing, PrepareCommit, PrepareAbort): producer, age against timeout and
// the partitions they hold, from GET /api/transactions every 5 s.
import { html } from '../ui/html.js';
import { useApi } from '../ui/use_api.js';
import { useReady } from '../ui/ready.js';
import { Table } from '../ui/table.js';
import { formatDuration, formatTime, formatTopicPartitions } from '../ui/format.js';
import { ErrorBox } from './parts.js';

const COLUMNS = [
  { id: 'id', label: 'Transactional id', value: (t) => t.transactional_id, testid: 'txn-id' },
  { id: 'state', label: 'State', value: (t) => t.state, testid: 'txn-state' },
  { id: 'pid', label: 'Producer id', value: (t) => t.producer_id, testid: 'txn-producer-id', numeric: true },
  { id: 'epoch', label: 'Epoch', value: (t) => t.producer_epoch, numeric: true },
  { id: 'start', label: 'Started', value: (t) => t.start_ms, cell: (t) => formatTime(t.start_ms) },
  {
    id: 'age', label: 'Age', value: (t) => t.age_ms, testid: 'txn-age', numeric: true,
    cell: (t) => (t.age_ms > t.timeout_ms ? html`<span class="bad">${formatDuration(t.age_ms)}</span>` : formatDuration(t.age_ms)),
    attrs: (t) => ({ 'data-ms': t.age_ms }),
  },
  { id: 'timeout', label: 'Timeout', value: (t) => t.timeout_ms, numeric: true, cell: (t) => formatDuration(t.timeout_ms) },
  { id: 'coordinator', label: 'Coordinator', value: (t) => t.coordinator, numeric: true },
  { id: 'partitions', label: 'Partitions', value: (t) => formatTopicPartitions(t.partitions), testid: 'txn-partitions' },
];

export function TransactionsPage() {
  const { data, error, settled } = useApi('/api/transactions', 5000);
  useReady('transactions', settled, data || error);
  return html`
    <div class="page">
      <h1>Open transactions</h1>
      <${ErrorBox} error=${error} />
      ${data && html`<${Table} columns=${COLUMNS} rows=${data.transactions} rowKey=${(t) => t.transactional_id}
        rowAttrs=${(t) => ({ 'data-testid': 'txn-row', 'data-txn': t.transactional_id })}
        initialSort=${{ id: 'age', descending: true }} empty="No open transactions." />`}
    </div>`;
}
