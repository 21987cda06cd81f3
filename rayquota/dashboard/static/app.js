// The dashboard's shell: sign-in, routing, and the live channel (Server-Sent Events read
// through fetch, so the bearer token travels in a header and never in a URL or a cookie).
import { h } from "./dom.js";
import { renderCohorts } from "./pages/cohorts.js";
import { renderQueue, renderQueueIndex } from "./pages/queue.js";
import { renderWorkload } from "./pages/workload.js";
import { renderRay } from "./pages/ray.js";
import { renderHistory } from "./pages/history.js";
import { renderUsage } from "./pages/usage.js";

const TOKEN_KEY = "rayquota-dashboard-token";
const main = document.getElementById("main");
const liveStatus = document.getElementById("live");
let stream = null; // AbortController of the open live channel

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

function takeTokenFromFragment() {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
}

function askForToken(message) {
  const dialog = document.getElementById("signin");
  document.getElementById("signin-error").textContent = message || "";
  if (!dialog.open) dialog.showModal();
  document.getElementById("signin-token").focus();
}

document.getElementById("signin-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = document.getElementById("signin-token").value.trim();
  if (!value) return;
  sessionStorage.setItem(TOKEN_KEY, value);
  document.getElementById("signin").close();
  document.getElementById("signin-token").value = "";
  route();
});

// --- routing -------------------------------------------------------------------------------

// Each page opens with and without a trailing slash (server.py SPA_PATHS serves both).
const ROUTES = [
  [/^\/(?:cohorts\/?)?$/, () => ["/api/cohorts", renderCohorts, "cohorts"]],
  // The queue picker also answers the parents of the deeper pages (a trimmed address).
  [/^\/(?:queues|localqueues|workloads)\/?$/, () => ["/api/cohorts", renderQueueIndex, "queues"]],
  [/^\/queues\/([^/]+)\/?$/, (m) => [`/api/queues/${m[1]}`, renderQueue, "queues"]],
  [/^\/localqueues\/([^/]+)\/([^/]+)\/?$/, (m) => [`/api/localqueues/${m[1]}/${m[2]}`, renderQueue, "queues"]],
  [/^\/workloads\/([^/]+)\/([^/]+)\/?$/, (m) => [`/api/workloads/${m[1]}/${m[2]}`, renderWorkload, "queues"]],
  [/^\/ray\/?$/, () => ["/api/ray", renderRay, "ray"]],
  [/^\/history\/?$/, () => ["/api/history", renderHistory, "history"]],
  [/^\/usage\/?$/, () => ["/api/usage", renderUsage, "usage"]],
];

export function navigate(href) {
  history.pushState(null, "", href);
  route();
}

document.addEventListener("click", (event) => {
  const anchor = event.target.closest("a");
  if (!anchor || anchor.hasAttribute("download") || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  const url = new URL(anchor.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith("/static/")) return;
  event.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener("popstate", route);

function route() {
  const path = location.pathname;
  for (const [pattern, target] of ROUTES) {
    const match = pattern.exec(path);
    if (!match) continue;
    const [api, render, nav] = target(match);
    for (const a of document.querySelectorAll("[data-nav]")) {
      if (a.dataset.nav === nav) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    const query = new URLSearchParams(location.search);
    open(api + (query.toString() ? `?${query}` : ""), render);
    return;
  }
  main.replaceChildren(h("p", {}, `No page at ${path}.`));
}

// --- the live channel ------------------------------------------------------------------------

function open(view, render) {
  if (stream) stream.abort();
  const controller = new AbortController();
  stream = controller;
  main.dataset.view = view;
  main.setAttribute("aria-busy", "true");
  const ctx = { view, setQuery, navigate, token };
  listen(view, controller.signal, (message) => {
    main.removeAttribute("aria-busy");
    if (message.status !== 200) {
      main.replaceChildren(h("p", { class: "error", role: "alert" }, message.body.error || `error ${message.status}`));
      return;
    }
    const focused = document.activeElement && document.activeElement.id;
    main.replaceChildren(render(message.body, ctx));
    main.dataset.rendered = String(Date.now());
    if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
  });
}

function setQuery(params) {
  const query = new URLSearchParams(location.search);
  for (const [key, value] of Object.entries(params)) {
    if (value === null || value === "" || value === undefined) query.delete(key);
    else query.set(key, String(value));
  }
  navigate(location.pathname + (query.toString() ? `?${query}` : ""));
}

async function listen(view, signal, onMessage) {
  let delay = 500;
  while (!signal.aborted) {
    const secret = token();
    if (!secret) {
      liveStatus.textContent = "signed out";
      askForToken();
      return;
    }
    try {
      const response = await fetch(`/api/live?view=${encodeURIComponent(view)}`, {
        headers: { Authorization: `Bearer ${secret}`, Accept: "text/event-stream" },
        cache: "no-store",
        signal,
      });
      if (response.status === 401) {
        sessionStorage.removeItem(TOKEN_KEY);
        liveStatus.textContent = "signed out";
        askForToken("The API server did not accept that token.");
        return;
      }
      if (!response.ok) {
        const body = await response.json().catch(() => ({}));
        onMessage({ status: response.status, body });
        return;
      }
      liveStatus.textContent = "live";
      delay = 500;
      await readEvents(response.body, onMessage);
    } catch (error) {
      if (signal.aborted) return;
    }
    liveStatus.textContent = "reconnecting";
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 10000);
  }
}

async function readEvents(body, onMessage) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (data) onMessage(JSON.parse(data));
    }
  }
}

async function showUser() {
  const secret = token();
  if (!secret) return;
  const response = await fetch("/api/whoami", { headers: { Authorization: `Bearer ${secret}` } });
  if (response.ok) {
    const me = await response.json();
    document.getElementById("whoami").textContent = `signed in as ${me.user}`;
  }
}

takeTokenFromFragment();
route();
showUser();
