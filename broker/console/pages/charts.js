// Live charts of this node's counters and histograms (GET /api/charts?since=<ms>, polled every
// interval_ms, appended): requests/s per API, latency percentiles of one API (log y), bytes
// in/out per s, and bytes in and bytes out per s of the busiest topics. window.__charts holds each chart's
// number of points for the browser tests.
import { useLayoutEffect, useMemo, useState } from '../vendor/hooks.module.js';
import { html } from '../ui/html.js';
import { get } from '../api.js';
import { useReady } from '../ui/ready.js';
import { Chart } from '../ui/chart.js';
import { formatBytesRate, formatMicros, formatRate } from '../ui/format.js';
import { ErrorBox } from './parts.js';

const SAMPLES_MAX = 720;
const REQUEST_APIS_MAX = 6;
const TOPICS_MAX = 10;

const OTHER_TOPICS = '(other)';

// Names ranked by the sum of value(sample, name) over the samples, largest first.
function topNames(samples, namesOf, value, limit, always = []) {
  const sums = new Map();
  for (const s of samples) for (const name of namesOf(s)) sums.set(name, (sums.get(name) || 0) + (value(s, name) || 0));
  const rest = [...sums.keys()].filter((n) => !always.includes(n)).sort((a, b) => sums.get(b) - sums.get(a));
  return [...always, ...rest].slice(0, limit);
}

function seriesData(samples, names, value) {
  return [samples.map((s) => s.at_ms / 1000), ...names.map((n) => samples.map((s) => value(s, n)))];
}

function buildCharts(samples, latencyApi) {
  const apis = topNames(samples, (s) => Object.keys(s.requests_per_s || {}), (s, n) => s.requests_per_s[n], REQUEST_APIS_MAX, ['Produce', 'Fetch']);
  const busiest = (field) => topNames(samples, (s) => Object.keys(s.topics || {}).filter((t) => t !== OTHER_TOPICS), (s, n) => s.topics[n]?.[field], TOPICS_MAX);
  const topics = busiest('bytes_in_per_s');
  const topicsOut = busiest('bytes_out_per_s');
  const percentile = (i) => (s) => {
    const v = s.latency_us?.[latencyApi]?.[i];
    return v == null || v <= 0 ? null : v; // a log axis has no place for 0
  };
  return {
    requests: { series: apis.map((label) => ({ label })), data: seriesData(samples, apis, (s, n) => s.requests_per_s?.[n] ?? 0) },
    latency: {
      series: [{ label: 'p50' }, { label: 'p99' }, { label: 'p999' }],
      data: [samples.map((s) => s.at_ms / 1000), ...[0, 1, 2].map((i) => samples.map(percentile(i)))],
    },
    bytes: {
      series: [{ label: 'bytes in' }, { label: 'bytes out' }],
      data: seriesData(samples, ['bytes_in_per_s', 'bytes_out_per_s'], (s, n) => s[n] ?? 0),
    },
    topics: { series: topics.map((label) => ({ label })), data: seriesData(samples, topics, (s, n) => s.topics?.[n]?.bytes_in_per_s ?? 0) },
    topics_out: { series: topicsOut.map((label) => ({ label })), data: seriesData(samples, topicsOut, (s, n) => s.topics?.[n]?.bytes_out_per_s ?? 0) },
  };
}

// Polls the node's chart ring, appending new samples; keeps the last SAMPLES_MAX.
function useChartSamples() {
  const [state, setState] = useState({ samples: [], nodeId: null, intervalMs: 5000, error: null, polled: false });
  useLayoutEffect(() => {
    let alive = true;
    let timer = null;
    let since = 0;
    let samples = [];
    const poll = async () => {
      let intervalMs = 5000;
      try {
        const answer = await get(`/api/charts?since=${since}`);
        if (!alive) return;
        intervalMs = answer.interval_ms || intervalMs;
        samples = samples.concat(answer.samples).slice(-SAMPLES_MAX);
        if (samples.length) since = samples[samples.length - 1].at_ms;
        setState({ samples, nodeId: answer.node_id, intervalMs, error: null, polled: true });
      } catch (error) {
        if (!alive) return;
        setState((s) => ({ ...s, error, polled: error.status !== 401 }));
      }
      timer = setTimeout(poll, intervalMs);
    };
    poll();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, []);
  return state;
}

export function ChartsPage() {
  const { samples, nodeId, intervalMs, error, polled } = useChartSamples();
  const [latencyApi, setLatencyApi] = useState('Produce');
  const charts = useMemo(() => buildCharts(samples, latencyApi), [samples, latencyApi]);
  const apis = useMemo(() => [...new Set(samples.flatMap((s) => Object.keys(s.latency_us || {})).concat('Produce'))].sort(), [samples]);

  // Before the render, so the counts are there when the ready mark is.
  window.__charts = window.__charts || {};
  for (const [id, chart] of Object.entries(charts)) window.__charts[id] = chart.data[0].length;
  useReady('charts', polled, samples);

  return html`
    <div class="page">
      <h1>Charts <span class="muted small">node ${nodeId ?? '?'}, one sample every ${intervalMs / 1000} s</span></h1>
      <${ErrorBox} error=${error} />
      <div class="charts">
        <section><h2>Requests per second</h2>
          <${Chart} testid="chart-requests" series=${charts.requests.series} data=${charts.requests.data} format=${(v) => formatRate(v, '')} /></section>
        <section><h2>Latency of
            <select data-testid="latency-api" value=${latencyApi} onChange=${(e) => setLatencyApi(e.currentTarget.value)}>
              ${apis.map((a) => html`<option key=${a} value=${a}>${a}</option>`)}
            </select></h2>
          <${Chart} testid="chart-latency" series=${charts.latency.series} data=${charts.latency.data} log=${true} format=${formatMicros} /></section>
        <section><h2>Bytes in and out per second</h2>
          <${Chart} testid="chart-bytes" series=${charts.bytes.series} data=${charts.bytes.data} format=${formatBytesRate} /></section>
        <section><h2>Bytes in per second, busiest topics</h2>
          <${Chart} testid="chart-topics" series=${charts.topics.series} data=${charts.topics.data} format=${formatBytesRate} /></section>
        <section><h2>Bytes out per second, busiest topics</h2>
          <${Chart} testid="chart-topics-out" series=${charts.topics_out.series} data=${charts.topics_out.data} format=${formatBytesRate} /></section>
      </div>
    </div>`;
}
