// Cohorts and ClusterQueues: the tree, then per queue its bars, counts, policy and conditions.
import { h, link, pager, prose, table } from "../dom.js";
import { quotaBar } from "../charts.js";

function tree(nodes) {
  if (!nodes.length) return null;
  return h(
    "ul",
    { class: "tree" },
    nodes.map((node) =>
      h(
        "li",
        {},
        node.kind === "ClusterQueue" ? link(`/queues/${node.name}`, node.name) : h("strong", {}, node.name),
        h("span", { class: "kind" }, ` ${node.kind}`),
        tree(node.children),
      ),
    ),
  );
}

function flavorBars(flavors) {
  return flavors.map((f) => h("div", { class: "flavor" }, h("h4", {}, `flavor ${f.flavor}`), f.resources.map(quotaBar)));
}

function conditionList(conditions) {
  if (!conditions.length) return h("p", { class: "muted" }, "no conditions yet");
  return h("ul", { class: "conditions" }, conditions.map((c) => h("li", {}, `${c.type}=${c.status}`, c.reason ? ` (${c.reason})` : "", c.message ? [": ", prose(c.message)] : "")));
}

function nameFilter(ctx) {
  const current = new URLSearchParams(location.search).get("name") || "";
  const input = h("input", { id: "cq-filter", type: "search", value: current, autocomplete: "off" });
  input.addEventListener("change", () => ctx.setQuery({ name: input.value.trim(), offset: null }));
  return h("p", {}, h("label", { for: "cq-filter" }, "ClusterQueue name contains "), input);
}

export function renderCohorts(page, ctx) {
  const queues = page.clusterQueues.map((cq) =>
    h(
      "section",
      { class: "card", "aria-labelledby": `cq-${cq.name}`, "data-cluster-queue": cq.name },
      h("h3", { id: `cq-${cq.name}` }, link(`/queues/${cq.name}`, cq.name)),
      h(
        "p",
        { class: "facts" },
        `cohort ${cq.cohort || "none"} · ${cq.queueingStrategy} · stop policy ${cq.stopPolicy} · `,
        h("span", { class: "pending-count" }, `pending ${cq.pending.active + cq.pending.inadmissible} (${cq.pending.active} active, ${cq.pending.inadmissible} inadmissible)`),
        " · ",
        h("span", { class: "admitted-count" }, `admitted ${cq.admitted}`),
        cq.inactive ? h("span", { class: "error" }, ` · inactive: ${cq.inactive}`) : null,
      ),
      flavorBars(cq.flavors),
      conditionList(cq.conditions),
    ),
  );
  const cohorts = page.cohorts.map((c) =>
    h("section", { class: "card" }, h("h3", {}, `cohort ${c.name}`), h("p", { class: "facts" }, `parent ${c.cohort || "none"}`), flavorBars(c.flavors)),
  );
  return h(
    "div",
    {},
    h("h1", {}, "Cohorts and ClusterQueues"),
    page.cycles.length ? h("p", { class: "error" }, `cohort cycles: ${page.cycles.map((c) => c.join(" → ")).join("; ")}`) : null,
    h("section", { "aria-labelledby": "tree-title" }, h("h2", { id: "tree-title" }, "Cohort tree"), tree(page.tree) || h("p", {}, "No ClusterQueues.")),
    h("h2", {}, "ClusterQueues"),
    nameFilter(ctx),
    pager(page.paging, (offset) => ctx.setQuery({ offset })),
    queues,
    cohorts.length ? [h("h2", {}, "Cohorts"), cohorts] : null,
  );
}
