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

// Lines over time, one per series; values are numbers or null (no sample).
export function lineChart(title, times, series, field) {
  const width = 640, height = 180, pad = 36;
  const values = series.flatMap((s) => s[field].filter((v) => v !== null));
  const top = Math.max(1, ...values);
  const t0 = times[0] ?? 0, t1 = times[times.length - 1] ?? 1;
  const px = (t) => pad + ((t - t0) / Math.max(1, t1 - t0)) * (width - pad - 8);
  const py = (v) => height - pad + 8 - (v / top) * (height - pad - 8);
  const paths = series.map((s, i) => {
    let d = "";
    s[field].forEach((v, j) => {
      if (v === null) return;
      d += `${d && s[field][j - 1] !== null ? "L" : "M"}${px(times[j]).toFixed(1)},${py(v).toFixed(1)}`;
    });
    return svg("path", { d, class: `line c${i % COLOURS}` });
  });
  const summary = series
    .map((s) => `${s.clusterQueue} now ${s[field][s[field].length - 1] ?? "-"}, peak ${Math.max(0, ...s[field].filter((v) => v !== null))}`)
    .join("; ");
  return h(
    "figure",
    { class: "chart" },
    h("figcaption", {}, title),
    svg(
      "svg",
      { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `${title}: ${summary || "no samples yet"}` },
      svg("line", { x1: pad, x2: width - 8, y1: height - pad + 8, y2: height - pad + 8, class: "axis" }),
      svg("text", { x: 4, y: 14, class: "axis-label" }, String(top)),
      svg("text", { x: 4, y: height - pad + 8, class: "axis-label" }, "0"),
      paths,
    ),
    h("ul", { class: "legend" }, series.map((s, i) => h("li", { class: `c${i % COLOURS}` }, `${s.clusterQueue}: now ${s[field][s[field].length - 1] ?? "-"}`))),
  );
}
