// A workload: pod sets and flavors, slices per cluster, timeline, Ray object, pods, events.
import { h, link, prose, table } from "../dom.js";

function slices(items) {
  if (!items.length) return h("p", { class: "muted" }, "No Ray object in view: demand per cluster unknown.");
  return h(
    "div",
    { class: "slices" },
    items.map((s) =>
      h(
        "section",
        { class: `card slice ${s.covered ? "covered" : "waiting"}`, "data-part": s.part, "aria-label": `cluster ${s.part}` },
        h("h3", {}, s.part, s.role ? h("span", { class: "tag" }, ` ${s.role}`) : null),
        h("p", {}, h("strong", {}, s.covered ? "covered by the admission" : "waiting for quota")),
        h("p", { class: "needs" }, `needs ${s.needs}`),
        h("p", { class: "facts" }, `pods per pod set: ${Object.entries(s.pods).map(([k, v]) => `${k} ${v}`).join(", ")}`),
      ),
    ),
  );
}

export function renderWorkload(page) {
  const owner = page.owner;
  return h(
    "div",
    {},
    h("h1", {}, `Workload ${page.namespace}/${page.name}`),
    h(
      "p",
      { class: "facts" },
      h("span", { id: "workload-phase" }, page.phase),
      ` · queue ${page.queue}`,
      page.clusterQueue ? [" · ClusterQueue ", link(`/queues/${page.clusterQueue}`, page.clusterQueue)] : null,
      ` · priority ${page.priority}`,
      page.position ? ` · position ${page.position}` : "",
    ),
    page.pendingReason ? h("p", { class: "reason", id: "pending-reason" }, prose(page.pendingReason)) : null,
    h("h2", {}, "Slices"),
    slices(page.slices),
    table(
      "Pod sets",
      ["Pod set", "Pods", "Per pod", "Admitted pods", "Flavors", "Admitted usage"],
      page.podSets.map((p) => h("tr", {}, h("td", {}, p.words ? `${p.words} (${p.name})` : p.name), h("td", {}, p.count), h("td", {}, p.perPod), h("td", {}, p.admittedCount ?? "-"), h("td", {}, Object.entries(p.flavors).map(([r, f]) => `${r}: ${f}`).join(", ") || "-"), h("td", {}, p.usage || "-"))),
    ),
    owner
      ? h(
          "section",
          { "aria-labelledby": "owner-title" },
          h("h2", { id: "owner-title" }, `${owner.kind} ${owner.name}`),
          h("p", { class: "facts" }, `gate ${owner.gate} · status ${owner.state}`),
          owner.children.length ? h("ul", {}, owner.children.map((c) => h("li", {}, `RayCluster ${c.name}: ${c.state}, gate ${c.gate}`))) : null,
        )
      : null,
    table(
      "Timeline",
      ["Time", "What", "Reason", "Message"],
      page.timeline.map((e) => h("tr", {}, h("td", {}, e.time), h("td", {}, e.what), h("td", {}, e.reason), h("td", { class: "message" }, prose(e.message)))),
    ),
    table("Pods", ["Pod", "Cluster", "Group", "Phase", "Node"], page.pods.map((p) => h("tr", {}, h("td", {}, p.name), h("td", {}, p.cluster), h("td", {}, p.group), h("td", {}, p.phase), h("td", {}, p.node || "-")))),
    table(
      "Events",
      ["Time", "Type", "Reason", "Object", "Message", "Count"],
      page.events.map((e) => h("tr", {}, h("td", {}, e.time), h("td", {}, e.type), h("td", {}, e.reason), h("td", {}, e.object), h("td", { class: "message" }, prose(e.message)), h("td", {}, e.count))),
    ),
  );
}
