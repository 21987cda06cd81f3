// Elements built from data, never from HTML strings: text is always text.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "onclick") el.addEventListener("click", value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined) el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function link(href, text) {
  return h("a", { href, "data-link": "" }, text);
}

export function table(caption, headers, rows, attrs = {}) {
  return h(
    "table",
    attrs,
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: headers.length, class: "empty" }, "none"))),
  );
}

export function age(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(seconds / 86400)}d`;
}

export function pager(paging, onPage) {
  const { total, offset, limit } = paging;
  const last = Math.min(total, offset + limit);
  return h(
    "nav",
    { class: "pager", "aria-label": "Pages of rows" },
    h("button", { type: "button", disabled: offset === 0, onclick: () => onPage(Math.max(0, offset - limit)) }, "Previous"),
    h("span", {}, total ? `${offset + 1}-${last} of ${total}` : "0 of 0"),
    h("button", { type: "button", disabled: last >= total, onclick: () => onPage(offset + limit) }, "Next"),
  );
}

// A sentence of the operator's (a reason, an event's message): names it quotes in backticks, as
// in "worker group `gpu` of RayJob `alpha`", are shown as code, never as raw backticks.
export function prose(text) {
  const parts = String(text ?? "").split("`");
  if (parts.length < 3) return String(text ?? "");
  return parts.map((part, i) => (i % 2 === 1 && i < parts.length - 1 ? h("code", {}, part) : i % 2 === 1 ? `\`${part}` : part));
}
