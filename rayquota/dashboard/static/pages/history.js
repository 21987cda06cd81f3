// History: usage of the charted resource and pending counts per ClusterQueue.
import { h } from "../dom.js";
import { lineChart } from "../charts.js";

export function renderHistory(page) {
  const span = page.times.length > 1 ? Math.round((page.times[page.times.length - 1] - page.times[0]) / 60) : 0;
  return h(
    "div",
    {},
    h("h1", {}, "History"),
    h("p", { class: "facts" }, `${page.times.length} samples, one every ${page.intervalSeconds}s, over the last ${span} minutes (${sourceText(page.source)}).`),
    page.source && page.source.error ? h("p", { class: "error", role: "status" }, page.source.error) : null,
    lineChart(`${page.resource} in use per ClusterQueue`, page.times, page.series, "usage"),
    lineChart("Pending workloads per ClusterQueue", page.times, page.series, "pending"),
  );
}

function sourceText(source) {
  if (source && source.kind === "prometheus") return "from Prometheus, the operator's own metrics";
  return "kept in the dashboard process";
}
