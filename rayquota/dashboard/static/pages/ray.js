// Ray objects: every RayCluster, RayJob and RayService with gate, queue, status and Workload.
import { h, link, pager, prose, table } from "../dom.js";

export function renderRay(page, ctx) {
  const current = new URLSearchParams(location.search).get("kind") || "";
  const filter = h(
    "label",
    { for: "kind-filter" },
    "Kind ",
    h("select", { id: "kind-filter" }, h("option", { value: "" }, "all"), page.kinds.map((k) => h("option", { value: k, selected: k === current }, k))),
  );
  filter.querySelector("select").addEventListener("change", (e) => ctx.setQuery({ kind: e.target.value, offset: null }));
  const rows = page.objects.map((o) =>
    h(
      "tr",
      { "data-object": `${o.kind}/${o.namespace}/${o.name}` },
      h("td", {}, o.kind, o.child ? h("span", { class: "tag" }, " child") : null),
      h("td", {}, `${o.namespace}/${o.name}`),
      h("td", {}, o.queue || "-"),
      h("td", {}, o.gate),
      h("td", {}, o.state),
      h("td", {}, o.quota ? [o.quota.status === "True" ? "reserved" : "waiting", o.quota.message ? [": ", prose(o.quota.message)] : ""] : "-"),
      h("td", {}, o.workload ? link(`/workloads/${o.workload.namespace}/${o.workload.name}`, o.workload.name) : "-"),
    ),
  );
  return h(
    "div",
    {},
    h("h1", {}, "Ray objects"),
    filter,
    pager(page.paging, (offset) => ctx.setQuery({ offset })),
    table("Ray objects", ["Kind", "Object", "Queue", "Gate", "Status", "Quota", "Workload"], rows, { id: "ray-objects" }),
  );
}
