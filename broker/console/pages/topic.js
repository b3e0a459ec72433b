// One topic: its partitions (leader, replicas, ISR, log start, high watermark, size), its
// active producers (DescribeProducers: idempotent and transactional ones, with an open
// transaction's first offset) and its configs (overrides marked), from GET /api/topics/<name>.
// Actions: alter a config (set or remove an override), delete records up to an offset.
import { useState } from '../vendor/hooks.module.js';
import { html } from '../ui/html.js';
import { enc } from '../api.js';
import { useApi } from '../ui/use_api.js';
import { useReady } from '../ui/ready.js';
import { useAction } from '../ui/action.js';
import { Table } from '../ui/table.js';
import { formatBytes, formatCount } from '../ui/format.js';
import { ErrorBox, Panel } from './parts.js';

const ids = (list) => (list || []).join(',');

function partitionColumns(topic) {
  return [
    { id: 'partition', label: 'Partition', value: (p) => p.partition, numeric: true },
    { id: 'leader', label: 'Leader', value: (p) => p.leader, testid: 'partition-leader', numeric: true, cell: (p) => (p.leader == null || p.leader < 0 ? html`<span class="bad">none</span>` : p.leader) },
    { id: 'replicas', label: 'Replicas', value: (p) => ids(p.replicas), testid: 'partition-replicas' },
    {
      id: 'isr', label: 'ISR', value: (p) => ids(p.isr), testid: 'partition-isr',
      cell: (p) => (p.isr.length < p.replicas.length ? html`<span class="bad">${ids(p.isr)}</span>` : ids(p.isr)),
    },
    { id: 'offline', label: 'Offline', value: (p) => ids(p.offline_replicas) },
    { id: 'log_start', label: 'Log start', value: (p) => p.log_start, testid: 'partition-log-start', numeric: true },
    { id: 'hw', label: 'High watermark', value: (p) => p.high_watermark, testid: 'partition-hw', numeric: true },
    { id: 'messages', label: 'Messages', value: (p) => (p.high_watermark ?? 0) - (p.log_start ?? 0), numeric: true, cell: (p) => formatCount((p.high_watermark ?? 0) - (p.log_start ?? 0)) },
    {
      id: 'size', label: 'Size', value: (p) => p.size_bytes, testid: 'partition-size', numeric: true,
      cell: (p) => formatBytes(p.size_bytes), attrs: (p) => (p.size_bytes == null ? {} : { 'data-bytes': p.size_bytes }),
    },
    { id: 'browse', label: '', value: () => null, cell: (p) => html`<a href=${`#/topics/${enc(topic)}/messages/${p.partition}`}>messages</a>` },
  ];
}

const PRODUCER_COLUMNS = [
  { id: 'partition', label: 'Partition', value: (p) => p.partition, numeric: true },
  { id: 'producer_id', label: 'Producer id', value: (p) => p.producer_id, testid: 'producer-id', numeric: true },
  { id: 'epoch', label: 'Epoch', value: (p) => p.producer_epoch, numeric: true },
  { id: 'last_sequence', label: 'Last sequence', value: (p) => p.last_sequence, numeric: true },
  { id: 'last', label: 'Last write', value: (p) => p.last_timestamp, cell: (p) => (p.last_timestamp > 0 ? new Date(p.last_timestamp).toISOString().replace('T', ' ').slice(0, 23) : '—') },
  {
    id: 'txn', label: 'Open transaction from offset', value: (p) => p.current_txn_start_offset, testid: 'producer-txn-start', numeric: true,
    cell: (p) => (p.current_txn_start_offset >= 0 ? p.current_txn_start_offset : html`<span class="muted">none</span>`),
  },
];

const CONFIG_COLUMNS = [
  { id: 'name', label: 'Config', value: (c) => c.name },
  {
    id: 'value', label: 'Value', value: (c) => c.value, testid: 'config-value',
    cell: (c) => (c.value == null ? html`<span class="muted">${c.sensitive ? '(sensitive)' : 'null'}</span>` : c.value),
  },
  { id: 'override', label: 'Override', value: (c) => (c.override ? 'yes' : ''), testid: 'config-override' },
  { id: 'source', label: 'Source', value: (c) => c.source },
  { id: 'read_only', label: 'Read-only', value: (c) => (c.read_only ? 'yes' : '') },
];

function AlterConfigForm({ topic, configs, run }) {
  const [name, setName] = useState('');
  const [value, setValue] = useState('');
  const [remove, setRemove] = useState(false);
  const submit = (e) => {
    e.preventDefault();
    const key = name.trim();
    const current = configs.find((c) => c.name === key);
    const now = current ? ` (now ${current.value ?? 'null'}, from ${current.source})` : '';
    run(remove
      ? { title: 'Remove a config override', effect: `Remove the override of ${key} on topic "${topic}"${now}: it falls back to the broker's or the default value.`, path: `/api/topics/${enc(topic)}/configs`, body: { set: {}, delete: [key] } }
      : { title: 'Alter a topic config', effect: `Set ${key} = ${value} on topic "${topic}"${now}.`, path: `/api/topics/${enc(topic)}/configs`, body: { set: { [key]: value }, delete: [] } });
  };
  return html`
    <form class="form-grid" onSubmit=${submit}>
      <label>Config <input data-testid="alter-config-name" list="config-names" required value=${name} onInput=${(e) => setName(e.currentTarget.value)} /></label>
      <datalist id="config-names">${configs.map((c) => html`<option key=${c.name} value=${c.name} />`)}</datalist>
      <label>Value <input data-testid="alter-config-value" value=${value} disabled=${remove} onInput=${(e) => setValue(e.currentTarget.value)} /></label>
      <label class="inline"><input type="checkbox" data-testid="alter-config-delete" checked=${remove} onChange=${(e) => setRemove(e.currentTarget.checked)} /> remove the override</label>
      <div class="wide"><button type="submit" class="primary" data-testid="alter-config-submit">Apply…</button></div>
    </form>`;
}

function DeleteRecordsForm({ topic, partitions, run }) {
  const [partition, setPartition] = useState('0');
  const [offset, setOffset] = useState('');
  const submit = (e) => {
    e.preventDefault();
    const p = partitions.find((x) => String(x.partition) === partition.trim());
    const raw = offset.trim().toLowerCase();
    const to = raw === 'hw' ? 'hw' : Number(raw);
    const upTo = to === 'hw' ? `the high watermark${p ? ` (${p.high_watermark})` : ''}` : `offset ${to}`;
    const range = p ? ` Log start is now ${p.log_start}, high watermark ${p.high_watermark}.` : '';
    run({
      title: 'Delete records',
      effect: `Delete every record of topic "${topic}" partition ${partition.trim()} before ${upTo}: the log start moves up to it and those records can no longer be read.${range} This cannot be undone.`,
      path: `/api/topics/${enc(topic)}/delete-records`,
      body: { partitions: { [partition.trim()]: to } },
    });
  };
  return html`
    <form class="form-grid" onSubmit=${submit}>
      <label>Partition <input data-testid="delete-records-partition" type="number" min="0" required value=${partition} onInput=${(e) => setPartition(e.currentTarget.value)} /></label>
      <label>Up to offset (or "hw") <input data-testid="delete-records-offset" required pattern="[0-9]+|hw|HW" value=${offset} onInput=${(e) => setOffset(e.currentTarget.value)} /></label>
      <div class="wide"><button type="submit" class="danger" data-testid="delete-records-submit">Delete…</button></div>
    </form>`;
}

export function TopicPage({ name }) {
  const { data, error, settled, reload } = useApi(`/api/topics/${enc(name)}`);
  const [open, setOpen] = useState(null); // 'alter' | 'delete' | null
  const { run, dialog, result } = useAction(reload);
  useReady('topic', settled, data || error);
  const toggle = (which) => setOpen(open === which ? null : which);

  return html`
    <div class="page">
      <h1><a href="#/topics">Topics</a> / ${name} ${data?.internal ? html`<span class="badge">internal</span>` : ''}
        <span class="right">
          <button type="button" data-testid="alter-config-open" onClick=${() => toggle('alter')}>Alter config</button>
          <button type="button" data-testid="delete-records-open" onClick=${() => toggle('delete')}>Delete records</button>
        </span>
      </h1>
      ${data && html`<p class="muted small">topic id ${data.topic_id}</p>`}
      <${ErrorBox} error=${error} />
      <${Panel} open=${open === 'alter'} title="Alter a config"><${AlterConfigForm} topic=${name} configs=${data?.configs || []} run=${run} /><//>
      <${Panel} open=${open === 'delete'} title="Delete records"><${DeleteRecordsForm} topic=${name} partitions=${data?.partitions || []} run=${run} /><//>
      ${result}
      ${data && html`
        <section>
          <h2>Partitions</h2>
          <${Table} columns=${partitionColumns(name)} rows=${data.partitions} rowKey=${(p) => p.partition}
            rowAttrs=${(p) => ({ 'data-testid': 'partition-row', 'data-partition': p.partition })}
            filterable=${data.partitions.length > 20} initialSort=${{ id: 'partition', descending: false }} />
        </section>
        <section>
          <h2>Producers</h2>
          ${data.producers_error && html`<p class="muted">Producers hidden: ${data.producers_error}</p>`}
          ${data.producers && (data.producers.length
            ? html`<${Table} columns=${PRODUCER_COLUMNS} rows=${data.producers} rowKey=${(p) => `${p.partition}-${p.producer_id}`}
                rowAttrs=${(p) => ({ 'data-testid': 'producer-row', 'data-partition': p.partition, 'data-producer': p.producer_id })}
                filterable=${data.producers.length > 20} initialSort=${{ id: 'partition', descending: false }} />`
            : html`<p class="muted">No active idempotent or transactional producers.</p>`)}
        </section>
        <section>
          <h2>Configs</h2>
          ${data.configs_error && html`<p class="muted">Configs hidden: ${data.configs_error}</p>`}
          ${data.configs && html`<${Table} columns=${CONFIG_COLUMNS} rows=${data.configs} rowKey=${(c) => c.name}
            rowAttrs=${(c) => ({ 'data-testid': 'config-row', 'data-config': c.name, class: c.override ? 'override' : '' })}
            initialSort=${{ id: 'override', descending: true }} />`}
        </section>`}
      ${dialog}
    </div>`;
}
