// Queue order: pending workloads in the order the engine judges them, with its sentence.
import { age, h, link, pager, prose, table } from "../dom.js";

export function renderQueueIndex(page) {
  return h(
    "div",
    {},
    h("h1", {}, "Queue order"),
    h("p", {}, "Choose a ClusterQueue:"),
    h("ul", {}, page.clusterQueues.map((cq) => h("li", {}, link(`/queues/${cq.name}`, cq.name), ` · pending ${cq.pending.active + cq.pending.inadmissible}, admitted ${cq.admitted}`, cq.inactive ? h("span", { class: "error" }, ` · inactive: ${cq.inactive}`) : null))),
  );
}

function pendingRow(row) {
  if (row.hidden) {
    return h("tr", { class: "hidden-row" }, h("td", {}, row.position), h("td", { colspan: 6 }, row.name), h("td", {}, row.priority), h("td", {}, age(row.ageSeconds)));
  }
  // "never fits": beyond the queue's maximum capacity, whatever is freed (Kueue's ExceedsMaxQuota).
  const state = row.fitsNow ? "fits now" : row.neverFits ? "inadmissible: never fits" : row.inadmissible ? "inadmissible" : "active";
  return h(
    "tr",
    { "data-workload": `${row.namespace}/${row.name}` },
    h("td", {}, row.position),
    h("td", {}, link(`/workloads/${row.namespace}/${row.name}`, `${row.namespace}/${row.name}`), row.scaleUp ? h("span", { class: "tag" }, " scale-up") : null),
    h("td", {}, row.owner ? `${row.owner.kind}/${row.owner.name}` : "-"),
    h("td", {}, row.localQueue),
    h("td", {}, row.needs),
    h("td", { class: "reason" }, row.reason ? prose(row.reason) : "waiting for the next admission cycle"),
    h("td", {}, state),
    h("td", {}, row.priority),
    h("td", {}, age(row.ageSeconds)),
  );
}

export function renderQueue(page, ctx) {
  const title = page.localQueue
    ? `LocalQueue ${page.localQueue.namespace}/${page.localQueue.name} → ClusterQueue ${page.clusterQueue}`
    : `ClusterQueue ${page.clusterQueue}`;
  const free = page.free.map((f) => `${f.flavor}/${f.resource} ${f.free.text} of ${f.nominal.text}`).join(", ");
  const holders = page.holders.map((w) =>
    h("li", {}, w.hidden ? w.name : [link(`/workloads/${w.namespace}/${w.name}`, `${w.namespace}/${w.name}`), ` holds ${w.holds}`, w.evicting ? " (evicting)" : ""]),
  );
  return h(
    "div",
    {},
    h("h1", {}, title),
    h("p", { class: "facts" }, `free now: ${free || "-"}`),
    h("section", { "aria-labelledby": "holders-title" }, h("h2", { id: "holders-title" }, "Holding quota"), holders.length ? h("ul", {}, holders) : h("p", {}, "nobody")),
    h("h2", {}, `Pending, in the order the engine judges them (${page.pending.total})`),
    pager(page.pending, (offset) => ctx.setQuery({ offset })),
    table(
      "Pending workloads",
      ["#", "Workload", "Owner", "LocalQueue", "Needs", "Why it waits", "State", "Priority", "Age"],
      page.pending.items.map(pendingRow),
      { class: "order", id: "queue-order" },
    ),
  );
}
