// Topics: every topic the user may describe, with partitions, replication, size, messages and
// the message rate (Δ end offsets / Δt between two polls, every 5 s; '—' until the second).
// Action: create a topic.
import { useMemo, useState } from '../vendor/hooks.module.js';
import { html } from '../ui/html.js';
import { enc } from '../api.js';
import { useApi } from '../ui/use_api.js';
import { useReady } from '../ui/ready.js';
import { useAction } from '../ui/action.js';
import { Table } from '../ui/table.js';
import { formatBytes, formatCount, formatRate } from '../ui/format.js';
import { ErrorBox, Panel } from './parts.js';

const POLL_MS = 5000;

const COLUMNS = [
  {
    id: 'name', label: 'Topic', value: (t) => t.name, testid: 'topic-name',
    cell: (t) => html`<a href=${`#/topics/${enc(t.name)}`}>${t.name}</a>${t.internal ? html` <span class="badge">internal</span>` : ''}`,
  },
  { id: 'partitions', label: 'Partitions', value: (t) => t.partitions, testid: 'topic-partitions', numeric: true },
  { id: 'rf', label: 'RF', value: (t) => t.replication_factor, testid: 'topic-rf', numeric: true },
  {
    id: 'urp', label: 'Under-replicated', value: (t) => t.under_replicated, numeric: true,
    cell: (t) => (t.under_replicated > 0 ? html`<span class="bad">${t.under_replicated}</span>` : '0'),
  },
  {
    id: 'size', label: 'Size', value: (t) => t.size_bytes, testid: 'topic-size', numeric: true,
    cell: (t) => formatBytes(t.size_bytes),
    attrs: (t) => (t.size_bytes == null ? {} : { 'data-bytes': t.size_bytes }),
  },
  { id: 'messages', label: 'Messages', value: (t) => t.messages, testid: 'topic-messages', numeric: true, cell: (t) => formatCount(t.messages) },
  { id: 'rate', label: 'Messages/s', value: (t) => t.rate, testid: 'topic-rate', numeric: true, cell: (t) => formatRate(t.rate, '') },
];

// Rows with `rate` from two answers `seconds` apart (null without a previous answer).
function withRates(data, prev, seconds) {
  const before = new Map();
  if (prev && seconds > 0) for (const t of prev.topics) before.set(t.name, t.end_offsets);
  return data.topics.map((t) => {
    const end = before.get(t.name);
    const rate = end == null ? null : Math.max(0, t.end_offsets - end) / seconds;
    return { ...t, rate };
  });
}

function parseConfigs(text) {
  const configs = {};
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (!trimmed) continue;
    const eq = trimmed.indexOf('=');
    if (eq <= 0) throw new Error(`"${trimmed}" is not key=value`);
    configs[trimmed.slice(0, eq).trim()] = trimmed.slice(eq + 1).trim();
  }
  return configs;
}

function CreateTopicForm({ run }) {
  const [name, setName] = useState('');
  const [partitions, setPartitions] = useState('1');
  const [rf, setRf] = useState('1');
  const [configText, setConfigText] = useState('');
  const [problem, setProblem] = useState(null);

  const submit = (e) => {
    e.preventDefault();
    let configs;
    try {
      configs = parseConfigs(configText);
    } catch (err) {
      setProblem(err.message);
      return;
    }
    setProblem(null);
    const body = { name: name.trim(), partitions: Number(partitions), replication_factor: Number(rf), configs };
    const configLines = Object.entries(configs).map(([k, v]) => `\n  ${k} = ${v}`).join('');
    run({
      title: 'Create topic',
      effect: `Create topic "${body.name}" with ${body.partitions} partition(s), replication factor ${body.replication_factor}` +
        (configLines ? `, and these configs:${configLines}` : ', with default configs.'),
      path: '/api/topics',
      body,
    });
  };

  return html`
    <form class="form-grid" onSubmit=${submit}>
      <label>Name <input data-testid="create-topic-name" required value=${name} onInput=${(e) => setName(e.currentTarget.value)} /></label>
      <label>Partitions <input data-testid="create-topic-partitions" type="number" min="1" required value=${partitions} onInput=${(e) => setPartitions(e.currentTarget.value)} /></label>
      <label>Replication factor <input data-testid="create-topic-rf" type="number" min="1" required value=${rf} onInput=${(e) => setRf(e.currentTarget.value)} /></label>
      <label class="wide">Configs (key=value, one a line)
        <textarea data-testid="create-topic-configs" rows="3" placeholder="retention.ms=86400000" value=${configText} onInput=${(e) => setConfigText(e.currentTarget.value)}></textarea>
      </label>
      <div class="wide"><button type="submit" class="primary" data-testid="create-topic-submit">Create…</button>
        ${problem && html` <span class="error">${problem}</span>`}</div>
    </form>`;
}

export function TopicsPage() {
  const { data, prev, at, prevAt, error, settled, reload } = useApi('/api/topics', POLL_MS);
  const [creating, setCreating] = useState(false);
  const [showInternal, setShowInternal] = useState(true);
  const { run, dialog, result } = useAction(reload);
  useReady('topics', settled, data || error);

  const rows = useMemo(() => (data ? withRates(data, prev, (at - prevAt) / 1000) : []), [data]);
  const shown = useMemo(() => (showInternal ? rows : rows.filter((t) => !t.internal)), [rows, showInternal]);

  return html`
    <div class="page">
      <h1>Topics
        <button type="button" class="primary right" data-testid="create-topic-open" onClick=${() => setCreating(!creating)}>Create topic</button>
      </h1>
      <${ErrorBox} error=${error} />
      <${Panel} open=${creating} title="Create a topic"><${CreateTopicForm} run=${run} /><//>
      ${result}
      ${data && data.truncated && html`<p class="warn">The list is truncated: the broker answered only the first ${rows.length} topics.</p>`}
      <label class="inline"><input type="checkbox" checked=${showInternal} onChange=${(e) => setShowInternal(e.currentTarget.checked)} /> show internal topics</label>
      ${data && html`<${Table} columns=${COLUMNS} rows=${shown} rowKey=${(t) => t.name}
        rowAttrs=${(t) => ({ 'data-testid': 'topic-row', 'data-topic': t.name })}
        initialSort=${{ id: 'name', descending: false }} empty="No topics." />`}
      ${dialog}
    </div>`;
}
