// Inline SVG: usage bars labelled with their numbers, and line charts over time.
import { h, svg } from "./dom.js";

// One resource of one flavor: usage against nominal quota, the borrowing room beyond it,
// with the numbers in words beside the bar (never colour alone).
export function quotaBar(bar) {
  const nominal = bar.nominal.value;
  const borrowRoom = bar.borrowingLimit ? bar.borrowingLimit.value : 0;
  const scale = Math.max(nominal + borrowRoom, bar.usage.value, 1e-9);
  const width = 240;
  const x = (v) => Math.round((v / scale) * width);
  const over = bar.usage.value > nominal;
  const words = [`${bar.usage.text} of ${bar.nominal.text} used`];
  if (bar.borrowed && bar.borrowed.value > 0) words.push(`${bar.borrowed.text} borrowed`);
  if (bar.available) words.push(`${bar.available.text} free`);
  words.push(`borrowing limit ${bar.borrowingLimit ? bar.borrowingLimit.text : "none"}`);
  words.push(`lending limit ${bar.lendingLimit ? bar.lendingLimit.text : "none"}`);
  const label = `${bar.resource}: ${words.join(", ")}`;
  return h(
    "div",
    { class: "bar-row" },
    h("span", { class: "bar-resource" }, bar.resource),
    svg(
      "svg",
      { width, height: 14, viewBox: `0 0 ${width} 14`, role: "img", "aria-label": label, class: "bar" },
      svg("rect", { x: 0, y: 0, width, height: 14, class: "bar-track" }),
      borrowRoom ? svg("rect", { x: x(nominal), y: 0, width: x(borrowRoom), height: 14, class: "bar-borrow-room" }) : null,
      svg("rect", { x: 0, y: 0, width: x(Math.min(bar.usage.value, scale)), height: 14, class: over ? "bar-used bar-over" : "bar-used" }),
      svg("line", { x1: x(nominal), x2: x(nominal), y1: 0, y2: 14, class: "bar-nominal" }),
    ),
    h("span", { class: "bar-text" }, words.join(" · ")),
  );
}

const COLOURS = 8;
const DASHES = 4;
const TICKS = 5;

// A sample holds until the next one: steps, not slopes between two samples.
function stepPath(values, times, px, py) {
  let d = "";
  let last = null;
  values.forEach((v, j) => {
    if (v === null) {
      last = null;
      return;
    }
    const x = px(times[j]).toFixed(1), y = py(v).toFixed(1);
    d += last === null ? `M${x},${y}` : `H${x}V${y}`;
    last = v;
  });
  return d;
}

function clock(t, withSeconds) {
  const at = new Date(t * 1000);
  const two = (n) => String(n).padStart(2, "0");
  return `${two(at.getHours())}:${two(at.getMinutes())}${withSeconds ? `:${two(at.getSeconds())}` : ""}`;
}

// Time labels under the x axis, evenly spaced over the window shown.
function timeAxis(t0, t1, px, y) {
  if (t1 <= t0) return [];
  const withSeconds = t1 - t0 < 600;
  return Array.from({ length: TICKS }, (_, k) => t0 + ((t1 - t0) * k) / (TICKS - 1)).map((t, k) =>
    svg("text", { x: px(t).toFixed(1), y, class: "axis-label time-label", "text-anchor": k === 0 ? "start" : k === TICKS - 1 ? "end" : "middle" }, clock(t, withSeconds)),
  );
}

// Series drawn on top of each other (every idle queue at 0) are told apart in the legend: a
// series is "the same line" as an earlier one when they agree wherever both have samples.
function sameAs(series, field) {
  const agree = (a, b) =>
    a.some((v, k) => v !== null && b[k] !== null) && a.every((v, k) => v === null || b[k] === null || v === b[k]);
  return series.map((s, i) => {
    const twin = series.slice(0, i).find((other) => agree(s[field], other[field]));
    return twin ? twin.clusterQueue : undefined;
  });
}

// Lines over time, one per series; values are numbers or null (no sample).
export function lineChart(title, times, series, field) {
  const width = 640, height = 196, pad = 36, bottom = 24;
  const values = series.flatMap((s) => s[field].filter((v) => v !== null));
  const top = Math.max(1, ...values);
  const t0 = times[0] ?? 0, t1 = times[times.length - 1] ?? 1;
  const baseline = height - bottom;
  const px = (t) => pad + ((t - t0) / Math.max(1, t1 - t0)) * (width - pad - 8);
  const py = (v) => baseline - (v / top) * (baseline - 8);
  const style = (i) => `c${i % COLOURS} d${i % DASHES}`;
  const paths = series.map((s, i) => svg("path", { d: stepPath(s[field], times, px, py), class: `line ${style(i)}` }));
  const twins = sameAs(series, field);
  const now = (s) => s[field][s[field].length - 1] ?? "-";
  const summary = series
    .map((s) => `${s.clusterQueue} now ${now(s)}, peak ${Math.max(0, ...s[field].filter((v) => v !== null))}`)
    .join("; ");
  const span = times.length > 1 ? `, from ${clock(t0, true)} to ${clock(t1, true)}` : "";
  return h(
    "figure",
    { class: "chart" },
    h("figcaption", {}, title),
    svg(
      "svg",
      { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `${title}${span}: ${summary || "no samples yet"}` },
      svg("line", { x1: pad, x2: width - 8, y1: baseline, y2: baseline, class: "axis" }),
      svg("text", { x: 4, y: 14, class: "axis-label" }, String(top)),
      svg("text", { x: 4, y: baseline, class: "axis-label" }, "0"),
      timeAxis(t0, t1, px, height - 6),
      paths,
    ),
    h(
      "ul",
      { class: "legend" },
      series.map((s, i) =>
        h(
          "li",
          { "data-series": s.clusterQueue },
          svg("svg", { width: 28, height: 10, "aria-hidden": "true" }, svg("line", { x1: 0, x2: 28, y1: 5, y2: 5, class: `line ${style(i)}` })),
          ` ${s.clusterQueue}: now ${now(s)}`,
          twins[i] !== undefined ? h("span", { class: "muted" }, ` (same line as ${twins[i]}, drawn under it)`) : null,
        ),
      ),
    ),
  );
}
