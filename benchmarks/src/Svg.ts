import type { BarChart, LineChart } from './Workload';
import { fmtBytes, fmtCount, fmtMs, fmtRate, fmtUs } from './Format';

/** Hand-written SVG charts, small enough to inline in Markdown. */

const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="12"';
const PILE = '#1f6feb';
const OTHER = '#8c959f';
const PALETTE = ['#cf222e', '#bf8700', '#1f6feb', '#0a7d33', '#8250df', '#57606a', '#e16f24'];

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function fmtValue(unit: string, v: number): string {
  if (unit === 'bytes') return fmtBytes(v);
  if (unit === 'ms') return fmtMs(v);
  if (unit === 'µs') return fmtUs(v);
  return fmtRate(v);
}

/** Horizontal bars, one per peer, value printed at the end of each bar; pile bars in blue. */
export function barChart(c: BarChart): string {
  const labelW = 190;
  const barMax = 330;
  const valueW = 110;
  const rowH = 24;
  const top = 30;
  const width = labelW + barMax + valueW;
  const height = top + c.bars.length * rowH + 10;
  const max = Math.max(...c.bars.map((b) => b.value), Number.MIN_VALUE);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${esc(c.title)}">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="8" y="18" ${FONT} font-weight="bold" fill="#24292f">${esc(`${c.title} (${c.unit})`)}</text>`,
  ];
  c.bars.forEach((b, i) => {
    const y = top + i * rowH;
    const w = Math.max(1, (b.value / max) * barMax);
    parts.push(
      `<text x="${labelW - 8}" y="${y + 15}" ${FONT} text-anchor="end" fill="#24292f">${esc(b.label)}</text>`,
      `<rect x="${labelW}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 8}" rx="2" fill="${b.highlight === true ? PILE : OTHER}"/>`,
      `<text x="${(labelW + w + 6).toFixed(1)}" y="${y + 15}" ${FONT} fill="#24292f">${esc(fmtValue(c.unit, b.value))}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('\n');
}

/** Rounded-up axis maximum: 1, 2 or 5 times a power of ten. */
function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

/** An axis tick's number: as many decimals as the axis's scale needs. */
function tick(v: number, max: number): string {
  const decimals = max >= 10 ? 0 : max >= 1 ? 1 : Math.min(6, Math.ceil(-Math.log10(max)) + 1);
  return v.toFixed(decimals);
}

/** Lines of [x, y] points on linear axes starting at zero, with a legend giving each line's last y in the unit `yLabel` names (results files store charts, so the label is the unit). */
export function lineChart(c: LineChart): string {
  const width = 720;
  const height = 340;
  const left = 64;
  const right = 250;
  const top = 34;
  const bottom = 44;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const all = c.lines.flatMap((l) => l.points);
  const xMax = niceMax(Math.max(...all.map((p) => p[0]), 1));
  const yMax = niceMax(Math.max(...all.map((p) => p[1]), 0));
  const X = (x: number): number => left + (x / xMax) * plotW;
  const Y = (y: number): number => top + plotH - (y / yMax) * plotH;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${esc(c.title)}">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="8" y="18" ${FONT} font-weight="bold" fill="#24292f">${esc(c.title)}</text>`,
  ];
  for (let i = 0; i <= 5; i++) {
    const yv = (yMax * i) / 5;
    const xv = (xMax * i) / 5;
    parts.push(
      `<line x1="${left}" x2="${left + plotW}" y1="${Y(yv).toFixed(1)}" y2="${Y(yv).toFixed(1)}" stroke="#d0d7de" stroke-width="1"/>`,
      `<text x="${left - 6}" y="${(Y(yv) + 4).toFixed(1)}" ${FONT} text-anchor="end" fill="#57606a">${esc(tick(yv, yMax))}</text>`,
      `<text x="${X(xv).toFixed(1)}" y="${top + plotH + 16}" ${FONT} text-anchor="middle" fill="#57606a">${esc(fmtCount(xv))}</text>`,
    );
  }
  parts.push(
    `<text x="${left + plotW / 2}" y="${height - 8}" ${FONT} text-anchor="middle" fill="#24292f">${esc(c.xLabel)}</text>`,
    `<text x="14" y="${top + plotH / 2}" ${FONT} text-anchor="middle" fill="#24292f" transform="rotate(-90 14 ${top + plotH / 2})">${esc(c.yLabel)}</text>`,
  );
  c.lines.forEach((l, i) => {
    const color = PALETTE[i % PALETTE.length]!;
    const pts = [...l.points].sort((a, b) => a[0] - b[0]);
    parts.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(' ')}"/>`,
    );
    for (const [x, y] of pts) parts.push(`<circle cx="${X(x).toFixed(1)}" cy="${Y(y).toFixed(1)}" r="3" fill="${color}"/>`);
    const ly = top + 10 + i * 20;
    const last = pts[pts.length - 1];
    parts.push(
      `<line x1="${left + plotW + 14}" x2="${left + plotW + 34}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="3"/>`,
      `<text x="${left + plotW + 40}" y="${ly + 4}" ${FONT} fill="#24292f">${esc(`${l.label}${last !== undefined ? ` ${fmtValue(c.yLabel, last[1])}` : ''}`)}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('\n');
}
