// Table: plain <tr>/<td> rows (no component per row, so 1,000 rows render in a few ms), a
// filter box and sorting by clicking a header (click again to reverse).
//
// columns: [{ id, label, value(row) -> sort/filter value, cell?(row) -> content,
//             testid?, attrs?(row) -> extra <td> attributes, numeric? }]
// rowKey(row) -> unique key; rowAttrs(row) -> <tr> attributes (data-testid, data-...).
import { useMemo, useState } from '../vendor/hooks.module.js';
import { h, html } from './html.js';

const collator = new Intl.Collator('en', { numeric: true });

function compare(a, b) {
  if (a == null) return b == null ? 0 : 1; // empty values last whatever the direction
  if (b == null) return -1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return collator.compare(String(a), String(b));
}

function renderRow(columns, row, rowKey, rowAttrs) {
  const cells = columns.map((column) =>
    h(
      'td',
      {
        'data-testid': column.testid,
        class: column.numeric ? 'num' : undefined,
        ...(column.attrs ? column.attrs(row) : null),
      },
      column.cell ? column.cell(row) : column.value(row),
    ),
  );
  return h('tr', { key: rowKey(row), ...(rowAttrs ? rowAttrs(row) : null) }, cells);
}

export function Table({ columns, rows, rowKey, rowAttrs, filterable = true, initialSort, empty }) {
  const [filter, setFilter] = useState('');
  const [sort, setSort] = useState(initialSort || null); // { id, descending }

  const shown = useMemo(() => {
    let out = rows;
    const needle = filter.trim().toLowerCase();
    if (needle) {
      out = out.filter((row) =>
        columns.some((c) => String(c.value(row) ?? '').toLowerCase().includes(needle)),
      );
    }
    const column = sort && columns.find((c) => c.id === sort.id);
    if (column) {
      const sign = sort.descending ? -1 : 1;
      out = [...out].sort((a, b) => {
        const va = column.value(a);
        const vb = column.value(b);
        if (va == null || vb == null) return compare(va, vb);
        return sign * compare(va, vb);
      });
    }
    return out;
  }, [rows, filter, sort, columns]);

  const clickHeader = (id) =>
    setSort((s) => (s && s.id === id ? { id, descending: !s.descending } : { id, descending: false }));

  return html`
    <div class="table-block">
      ${filterable &&
      html`<div class="table-tools">
        <input class="filter" type="search" placeholder="Filter" value=${filter}
          onInput=${(e) => setFilter(e.currentTarget.value)} />
        <span class="muted">${shown.length === rows.length ? `${rows.length} rows` : `${shown.length} of ${rows.length}`}</span>
      </div>`}
      <table class="grid">
        <thead>
          <tr>
            ${columns.map(
              (c) => html`<th key=${c.id} class=${c.numeric ? 'num sortable' : 'sortable'}
                onClick=${() => clickHeader(c.id)}>${c.label}${sort && sort.id === c.id ? (sort.descending ? ' ▼' : ' ▲') : ''}</th>`,
            )}
          </tr>
        </thead>
        <tbody>
          ${shown.map((row) => renderRow(columns, row, rowKey, rowAttrs))}
        </tbody>
      </table>
      ${rows.length === 0 && html`<p class="muted">${empty || 'Nothing here.'}</p>`}
    </div>`;
}
