// Record bytes as the message browser shows them. The broker sends keys, values and header
// values as {size, base64, truncated} or null; null (no value) is not the same as empty.
//   text: UTF-8 (fatal), else "(binary, N bytes)"
//   json: JSON.parse → pretty-printed, else "(not JSON)"
//   hex:  two hex digits a byte, 16 bytes a line
export const FORMATS = ['text', 'json', 'hex'];

export function decodeBase64(base64) {
  const binary = atob(base64 || '');
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

// The text of the bytes, or null when they are not UTF-8. A truncated value may end inside a
// character: `stream` leaves such a tail out instead of calling the whole value binary.
function utf8(bytes, truncated) {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes, { stream: !!truncated });
  } catch {
    return null;
  }
}

function hex(bytes, compact) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    lines.push(Array.from(bytes.subarray(i, i + 16), (b) => b.toString(16).padStart(2, '0')).join(' '));
  }
  return lines.join(compact ? ' ' : '\n');
}

// { text, kind } where kind is 'null' | 'empty' | 'binary' | 'value' (for styling).
// `compact` keeps JSON and hex on one line (header values).
export function showBytes(field, format, compact = false) {
  if (field == null) return { text: 'null', kind: 'null' };
  const bytes = decodeBase64(field.base64);
  if (bytes.length === 0 && field.size === 0) return { text: '', kind: 'empty' };
  if (format === 'hex') return { text: hex(bytes, compact), kind: 'value' };
  const text = utf8(bytes, field.truncated);
  if (format === 'json') {
    if (text == null || field.truncated) return { text: '(not JSON)', kind: 'binary' };
    try {
      return { text: JSON.stringify(JSON.parse(text), null, compact ? 0 : 2), kind: 'value' };
    } catch {
      return { text: '(not JSON)', kind: 'binary' };
    }
  }
  if (text == null) return { text: `(binary, ${field.size} bytes)`, kind: 'binary' };
  return { text, kind: 'value' };
}
