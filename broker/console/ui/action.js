// useAction: the path every console action takes — confirm the spelled-out effect, POST,
// show the outcome in `action-result` (per-row errors of partial failures included), then
// let the page reload its data.
//
// The broker answers {ok, results: [{name | partition, error: CODE | null, message}]} or an
// error status with {error: CODE, message}. The result text holds "OK" on success, else the
// CODE(s).
import { useState } from '../vendor/hooks.module.js';
import { post } from '../api.js';
import { useConfirm } from './confirm.js';
import { html } from './html.js';

function rowLabel(row) {
  if (row.name != null) return row.name;
  if (row.partition != null) return `partition ${row.partition}`;
  return '';
}

function fromAnswer(answer) {
  const rows = (answer?.results || []).map((row) => ({
    label: rowLabel(row),
    text: row.error ? `${row.error}${row.message ? `: ${row.message}` : ''}` : `done${row.message ? `: ${row.message}` : ''}`,
    failed: !!row.error,
  }));
  const failed = !answer?.ok || rows.some((r) => r.failed);
  return { failed, headline: failed ? 'FAILED' : 'OK', rows };
}

export function useAction(onDone) {
  const { ask, dialog } = useConfirm();
  const [outcome, setOutcome] = useState(null);

  const run = async ({ title, effect, path, body }) => {
    if (!(await ask(title, effect))) return false;
    setOutcome({ pending: true, headline: `${title}…`, rows: [] });
    try {
      setOutcome(fromAnswer(await post(path, body)));
    } catch (err) {
      setOutcome({ failed: true, headline: `${err.code}: ${err.message}`, rows: [] });
    }
    if (onDone) onDone();
    return true;
  };

  // While the POST runs there is no `action-result` yet: tests read it once, when it appears.
  const result = outcome && outcome.pending
    ? html`<div class="action-result pending">${outcome.headline}</div>`
    : outcome && html`
    <div data-testid="action-result" class=${`action-result ${outcome.failed ? 'bad' : 'good'}`}>
      <strong>${outcome.headline}</strong>${' '}
      ${outcome.rows.length > 0 && html`<ul>${outcome.rows.map((r, i) => html`<li key=${i}>${r.label ? `${r.label}: ` : ''}${r.text}</li>`)}</ul>`}
    </div>`;

  return { run, dialog, result };
}
