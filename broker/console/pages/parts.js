// Small pieces the pages share: an error line, a labelled figure, a show/hide panel.
import { html } from '../ui/html.js';

export function ErrorBox({ error }) {
  if (!error) return null;
  return html`<p class="error">${error.code}: ${error.message}</p>`;
}

export function Stat({ label, value, testid, bad }) {
  return html`
    <div class=${`stat ${bad ? 'bad' : ''}`}>
      <div class="stat-value" data-testid=${testid}>${value ?? '—'}</div>
      <div class="stat-label">${label}</div>
    </div>`;
}

// A form panel opened by a button (`<name>-open`).
export function Panel({ open, title, children }) {
  if (!open) return null;
  return html`<section class="panel"><h3>${title}</h3>${children}</section>`;
}
