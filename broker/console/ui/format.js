// Human formats for figures: bytes, counts, rates, durations and times.
// Every function takes null/undefined and answers '—', so tables need no special case.

const DASH = '—';
const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

export function formatBytes(bytes) {
  if (bytes == null) return DASH;
  let value = Number(bytes);
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${BYTE_UNITS[unit]}`;
}

export function formatCount(count) {
  if (count == null) return DASH;
  return Number(count).toLocaleString('en-US');
}

// A per-second rate: up to two decimals below 10, whole numbers above.
export function formatRate(perSecond, unit = '/s') {
  if (perSecond == null || !Number.isFinite(perSecond)) return DASH;
  const digits = Math.abs(perSecond) < 10 ? 2 : Math.abs(perSecond) < 100 ? 1 : 0;
  return `${perSecond.toLocaleString('en-US', { maximumFractionDigits: digits })}${unit}`;
}

export function formatBytesRate(bytesPerSecond) {
  if (bytesPerSecond == null) return DASH;
  return `${formatBytes(Math.round(bytesPerSecond))}/s`;
}

// 850 ms, 5.3 s, 2 m 10 s, 1 h 5 m, 3 d 4 h.
export function formatDuration(ms) {
  if (ms == null) return DASH;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const s = Math.floor(seconds);
  if (s < 3600) return `${Math.floor(s / 60)} m ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} m`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

// Microseconds as the shortest readable unit (latency axes and cells).
export function formatMicros(us) {
  if (us == null) return DASH;
  if (us < 1000) return `${Math.round(us)} µs`;
  if (us < 1e6) return `${(us / 1000).toFixed(us < 1e4 ? 2 : 1)} ms`;
  return `${(us / 1e6).toFixed(2)} s`;
}

const pad = (n, width = 2) => String(n).padStart(width, '0');

// Local time, to the millisecond: 2024-12-06 15:46:40.123.
export function formatTime(ms) {
  if (ms == null || ms < 0) return DASH;
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

// The value a <input type="datetime-local" step="0.001"> shows for a time in ms.
export function toDatetimeLocal(ms) {
  return formatTime(ms).replace(' ', 'T');
}

// "orders-0,orders-1": topic partitions sorted by topic, then partition number.
export function formatTopicPartitions(list) {
  return [...(list || [])]
    .sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition))
    .map((tp) => `${tp.topic}-${tp.partition}`)
    .join(',');
}
