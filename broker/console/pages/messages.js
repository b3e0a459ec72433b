// Message browser: records of one partition from an offset or a timestamp (or the oldest /
// newest), with keys, values and header values shown as text, JSON or hex.
// The query lives in the hash (#/topics/<t>/messages/<p>?offset=N&limit=L or ?timestamp=MS),
// so a page of records is a link; prev/next move by offsets.
import { useMemo, useState } from '../vendor/hooks.module.js';
import { html } from '../ui/html.js';
import { enc } from '../api.js';
import { useApi } from '../ui/use_api.js';
import { useReady } from '../ui/ready.js';
import { formatTime, toDatetimeLocal } from '../ui/format.js';
import { FORMATS, showBytes } from '../ui/bytes.js';
import { ErrorBox } from './parts.js';

const LIMIT_DEFAULT = 20;
const LIMIT_MAX = 100;
const FORMAT_KEY = 'strata:message-format';

// The API query for a hash query: one of offset / timestamp / from, and a limit.
function apiQuery(query) {
  const out = new URLSearchParams();
  if (query.has('offset')) out.set('offset', query.get('offset'));
  else if (query.has('timestamp')) out.set('timestamp', query.get('timestamp'));
  else out.set('from', query.get('from') === 'start' ? 'start' : 'end');
  const limit = Math.min(LIMIT_MAX, Math.max(1, Number(query.get('limit')) || LIMIT_DEFAULT));
  out.set('limit', String(limit));
  return out;
}

function go(topic, partition, params) {
  location.hash = `#/topics/${enc(topic)}/messages/${partition}?${new URLSearchParams(params)}`;
}

function Bytes({ field, format, testid }) {
  const shown = showBytes(field, format);
  const pre = shown.kind === 'value' && (format !== 'text' || shown.text.includes('\n'));
  return html`<td data-testid=${testid} class=${`bytes ${shown.kind}`}>${pre ? html`<pre>${shown.text}</pre>` : shown.text}${field?.truncated ? html`<span class="muted"> … (${field.size} bytes in all)</span>` : ''}</td>`;
}

function headersText(headers, format) {
  return (headers || []).map((hd) => `${hd.key}=${showBytes(hd.value, format, true).text}`).join('; ');
}

function RecordRow({ record, format }) {
  return html`
    <tr data-testid="message-row" data-offset=${record.offset}>
      <td class="num">${record.offset}</td>
      <td data-testid="message-timestamp" data-ms=${record.timestamp} title=${record.timestamp_type}>${formatTime(record.timestamp)}</td>
      <${Bytes} field=${record.key} format=${format} testid="message-key" />
      <${Bytes} field=${record.value} format=${format} testid="message-value" />
      <td data-testid="message-headers" class="bytes">${headersText(record.headers, format)}</td>
      <td class="muted small">${record.producer_id >= 0 ? `pid ${record.producer_id}` : ''}${record.transactional ? ' txn' : ''}</td>
    </tr>`;
}

function QueryForm({ topic, partition, query, limit }) {
  const [mode, setMode] = useState(query.has('timestamp') ? 'timestamp' : 'offset');
  const [offset, setOffset] = useState(query.get('offset') ?? '');
  const [time, setTime] = useState(query.has('timestamp') ? toDatetimeLocal(Number(query.get('timestamp'))) : '');
  const [rows, setRows] = useState(String(limit));
  const [part, setPart] = useState(String(partition));
  const submit = (e) => {
    e.preventDefault();
    const params = { limit: rows };
    if (mode === 'offset') params.offset = offset || '0';
    else params.timestamp = String(new Date(time).getTime());
    go(topic, Number(part), params);
  };
  return html`
    <form class="form-row" onSubmit=${submit}>
      <label>Partition <input class="narrow" data-testid="messages-partition" type="number" min="0" value=${part} onInput=${(e) => setPart(e.currentTarget.value)} /></label>
      <select data-testid="messages-mode" value=${mode} onChange=${(e) => setMode(e.currentTarget.value)}>
        <option value="offset">from offset</option>
        <option value="timestamp">from time</option>
      </select>
      ${mode === 'offset'
        ? html`<input class="narrow" data-testid="messages-offset" type="number" min="0" value=${offset} onInput=${(e) => setOffset(e.currentTarget.value)} />`
        : html`<input data-testid="messages-timestamp" type="datetime-local" step="0.001" required value=${time} onInput=${(e) => setTime(e.currentTarget.value)} />`}
      <label>Limit <input class="narrow" data-testid="messages-limit" type="number" min="1" max=${LIMIT_MAX} value=${rows} onInput=${(e) => setRows(e.currentTarget.value)} /></label>
      <button type="submit" class="primary" data-testid="messages-go">Read</button>
    </form>`;
}

export function MessagesPage({ topic, partition, query }) {
  const params = useMemo(() => apiQuery(query), [query.toString()]);
  const limit = Number(params.get('limit'));
  const { data, error, settled } = useApi(`/api/topics/${enc(topic)}/partitions/${partition}/messages?${params}`);
  const [format, setFormat] = useState(() => sessionStorage.getItem(FORMAT_KEY) || 'text');
  useReady('messages', settled, data || error);

  const chooseFormat = (value) => {
    sessionStorage.setItem(FORMAT_KEY, value);
    setFormat(value);
  };
  const page = (extra) => go(topic, partition, { limit, ...extra });
  const atStart = !data || data.start_offset <= data.log_start;
  const atEnd = !data || data.next_offset >= data.high_watermark;

  return html`
    <div class="page">
      <h1><a href="#/topics">Topics</a> / <a href=${`#/topics/${enc(topic)}`}>${topic}</a> / partition ${partition}</h1>
      <${QueryForm} key=${`${partition}?${query}`} topic=${topic} partition=${partition} query=${query} limit=${limit} />
      <div class="form-row">
        <button type="button" onClick=${() => page({ from: 'start' })}>Oldest</button>
        <button type="button" data-testid="messages-prev" disabled=${atStart}
          onClick=${() => page({ offset: Math.max(data.log_start, data.start_offset - limit) })}>‹ Prev</button>
        <button type="button" data-testid="messages-next" disabled=${atEnd}
          onClick=${() => page({ offset: data.next_offset })}>Next ›</button>
        <button type="button" onClick=${() => page({ from: 'end' })}>Newest</button>
        <label>Show as
          <select data-testid="value-format" value=${format} onChange=${(e) => chooseFormat(e.currentTarget.value)}>
            ${FORMATS.map((f) => html`<option key=${f} value=${f}>${f}</option>`)}
          </select>
        </label>
        ${data && html`<span class="muted">log start ${data.log_start}, high watermark ${data.high_watermark}; offsets ${data.start_offset}–${data.next_offset - 1}</span>`}
      </div>
      <${ErrorBox} error=${error} />
      ${data?.note && html`<p class="warn" data-testid="messages-note">${data.note}</p>`}
      ${data && html`
        <table class="grid messages">
          <thead><tr><th class="num">Offset</th><th>Timestamp</th><th>Key</th><th>Value</th><th>Headers</th><th></th></tr></thead>
          <tbody>${data.records.map((r) => html`<${RecordRow} key=${r.offset} record=${r} format=${format} />`)}</tbody>
        </table>
        ${data.records.length === 0 && html`<p class="muted">No records here.</p>`}`}
    </div>`;
}
