// Chart: a uPlot time-series chart that follows its container's width.
//
// props: testid, series: [{ label, stroke? }], data: [xs (unix seconds), ...ys],
//        log (log y axis), format(value) -> axis and legend text.
// uPlot (145 KB) is imported on the first chart, so pages without charts do not parse it.
// New data goes through setData; a different set of series rebuilds the chart.
import { useEffect, useRef } from '../vendor/hooks.module.js';
import { html } from './html.js';

const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2',
  '#db2777', '#65a30d', '#9333ea', '#475569', '#ea580c', '#0d9488'];
const HEIGHT = 220;

let uPlotModule = null;
const loadUPlot = () => (uPlotModule ||= import('../vendor/uPlot.esm.js').then((m) => m.default));

function options({ series, log, format }, width) {
  const show = (v) => (v == null ? '—' : format ? format(v) : String(v));
  return {
    width,
    height: HEIGHT,
    // With a single point uPlot would span years around it: show the minute around it.
    scales: { x: { time: true, range: (u, min, max) => (max - min < 1 ? [min - 30, max + 30] : [min, max]) }, y: log ? { distr: 3 } : { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
    series: [
      {},
      ...series.map((s, i) => ({
        label: s.label,
        stroke: s.stroke || PALETTE[i % PALETTE.length],
        width: 1.5,
        value: (u, v) => show(v),
      })),
    ],
    // A log axis passes null for the splits it leaves unlabelled.
    axes: [{}, { size: 86, values: (u, values) => values.map((v) => (v == null ? '' : show(v))) }],
  };
}

export function Chart(props) {
  const containerRef = useRef(null);
  const plotRef = useRef(null);
  const seriesKey = `${props.log ? 'log' : 'lin'}|${props.series.map((s) => s.label).join('\u0000')}`;
  const keyRef = useRef('');
  const propsRef = useRef(props);
  propsRef.current = props;

  useEffect(() => {
    let alive = true;
    loadUPlot().then((UPlot) => {
      const container = containerRef.current;
      if (!alive || !container) return;
      const current = propsRef.current;
      if (plotRef.current && keyRef.current === seriesKey) {
        plotRef.current.setData(current.data);
        return;
      }
      if (plotRef.current) plotRef.current.destroy();
      keyRef.current = seriesKey;
      const width = Math.max(300, container.clientWidth);
      plotRef.current = new UPlot(options(current, width), current.data, container);
    });
    return () => {
      alive = false;
    };
  }, [props.data, seriesKey]);

  useEffect(() => {
    const container = containerRef.current;
    const observer = new ResizeObserver(() => {
      const plot = plotRef.current;
      if (plot) plot.setSize({ width: Math.max(300, container.clientWidth), height: HEIGHT });
    });
    observer.observe(container);
    return () => {
      observer.disconnect();
      if (plotRef.current) plotRef.current.destroy();
      plotRef.current = null;
    };
  }, []);

  return html`<div class="chart" data-testid=${props.testid} ref=${containerRef}></div>`;
}
