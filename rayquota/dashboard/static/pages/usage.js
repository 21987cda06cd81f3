// Usage (showback): resource-hours per ClusterQueue, LocalQueue or namespace over a window,
// as bars with their numbers, a table, and CSV/JSON downloads of the same answer.
import { h, svg, table } from "../dom.js";

const WINDOWS = [["1h", "last hour"], ["24h", "last 24 hours"], ["7d", "last 7 days"], ["30d", "last 30 days"]];
const GROUPINGS = [["clusterqueue", "ClusterQueue"], ["localqueue", "LocalQueue"], ["namespace", "namespace"]];

export function renderUsage(page, ctx) {
  const query = new URLSearchParams(location.search);
  const resource = page.resources.includes(query.get("resource")) ? query.get("resource") : page.resources[0];
  const controls = h(
    "div",
    { class: "controls" },
    picker("usage-since", "Window ", WINDOWS, query.get("since") || "24h", (v) => ctx.setQuery({ since: v })),
    " ",
    picker("usage-by", "Per ", GROUPINGS, page.by, (v) => ctx.setQuery({ by: v })),
    " ",
    page.resources.length > 1
      ? picker("usage-resource", "Chart ", page.resources.map((r) => [r, r]), resource, (v) => ctx.setQuery({ resource: v }))
      : null,
    " ",
    h("button", { type: "button", id: "export-csv", onclick: () => download(ctx, "csv") }, "Download CSV"),
    " ",
    h("button", { type: "button", id: "export-json", onclick: () => download(ctx, "json") }, "Download JSON"),
    h("span", { id: "export-error", class: "error", role: "alert" }),
  );
  const headers = [label(page.by), ...page.resources.map((r) => `${r} (${page.units[r]})`), "workloads"];
  const rows = page.rows.map((row) =>
    h(
      "tr",
      { "data-usage-row": row.key },
      h("th", { scope: "row" }, row.key, row.estimated ? h("span", { class: "muted" }, " (includes estimates)") : null),
      page.resources.map((r) => h("td", { "data-resource": r }, amount(row.hours[r]))),
      h("td", {}, String(row.workloads)),
    ),
  );
  return h(
    "div",
    {},
    h("h1", {}, "Usage"),
    h("p", { class: "facts" }, `From ${when(page.since)} to ${when(page.until)}, from the Workloads the API server still holds.`),
    controls,
    resource ? barChart(page, resource) : h("p", { class: "muted" }, "No quota was held in this window."),
    table(`Resource-hours per ${label(page.by)}`, headers, rows, { id: "usage-table" }),
    page.unrecoverable.length
      ? h("p", { class: "muted" }, `Not counted: ${page.unrecoverable.length} earlier admission(s) whose start and size are no longer recorded.`)
      : null,
  );
}

function picker(id, text, options, current, onChange) {
  const select = h("select", { id }, options.map(([value, words]) => h("option", { value, selected: value === current }, words)));
  select.addEventListener("change", (e) => onChange(e.target.value));
  return h("label", { for: id }, text, select);
}

function label(by) {
  return (GROUPINGS.find(([value]) => value === by) || [by, by])[1];
}

// Small amounts (a job admitted minutes ago) keep two significant digits instead of "0.00".
function amount(value) {
  if (value === 0) return "0";
  return value < 1 ? value.toPrecision(2) : value.toFixed(2);
}

function when(seconds) {
  return new Date(seconds * 1000).toISOString().replace(/\.\d+Z$/, "Z");
}

function barChart(page, resource) {
  const width = 640, rowHeight = 22, left = 200;
  const top = Math.max(1e-9, ...page.rows.map((r) => r.hours[resource]));
  const title = `${resource} ${page.units[resource]} per ${label(page.by)}`;
  const words = page.rows.map((r) => `${r.key} ${r.hours[resource].toFixed(2)}`).join("; ");
  const bars = page.rows.map((row, i) => {
    const y = i * rowHeight;
    const length = Math.round((row.hours[resource] / top) * (width - left - 80));
    return svg(
      "g",
      {},
      svg("text", { x: 4, y: y + 15, class: "bar-text" }, row.key),
      svg("rect", { x: left, y: y + 4, width: Math.max(1, length), height: rowHeight - 8, class: "bar-used" }),
      svg("text", { x: left + length + 6, y: y + 15, class: "bar-text" }, amount(row.hours[resource])),
    );
  });
  const height = Math.max(rowHeight, page.rows.length * rowHeight);
  return h(
    "figure",
    { class: "chart" },
    h("figcaption", {}, title),
    svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `${title}: ${words || "none"}` }, bars),
  );
}

async function download(ctx, format) {
  const query = new URLSearchParams(location.search);
  query.set("format", format);
  query.delete("resource");
  const response = await fetch(`/api/usage?${query}`, { headers: { Authorization: `Bearer ${ctx.token()}` }, cache: "no-store" });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    document.getElementById("export-error").textContent = `Download failed: ${body.error || `error ${response.status}`}`;
    return;
  }
  const text = format === "csv" ? await response.text() : JSON.stringify(await response.json(), null, 2);
  const type = format === "csv" ? "text/csv" : "application/json";
  const url = URL.createObjectURL(new Blob([text], { type }));
  const anchor = h("a", { href: url, download: `rayquota-usage-by-${query.get("by") || "clusterqueue"}.${format}` });
  document.body.append(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
