// The Streams view's pages: fetch the plugin's JSON (same origin: Airflow's login cookie goes
// along) and draw it. No framework, no build step.
"use strict";

const REFRESH_MS = 5000;

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const c of children.flat()) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return e;
}

async function getJson(url) {
  const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status} ${(await r.text()).slice(0, 200)}`);
  return r.json();
}

const fmt = {
  n: (v, d = 0) => v == null ? "–" : Number(v).toLocaleString(undefined, { maximumFractionDigits: d }),
  bytes: (v) => {
    if (v == null) return "–";
    const u = ["B", "KiB", "MiB", "GiB"]; let i = 0; let x = Number(v);
    while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    return `${x.toFixed(i ? 1 : 0)} ${u[i]}`;
  },
  age: (s) => s == null ? "–" : s < 90 ? `${Math.round(s)} s` : s < 5400 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`,
  time: (iso) => iso ? new Date(iso).toLocaleString() : "–",
  // a duration as `streamops status` gives it (observe.watermark.span): 850ms, 42s, 4m12s, 3h05m, 2d03h
  span: (ms) => {
    const s = Math.floor(ms / 1000); const two = (n) => String(n).padStart(2, "0");
    if (ms < 1000) return `${ms}ms`;
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
    if (s < 86400) return `${Math.floor(s / 3600)}h${two(Math.floor(s % 3600 / 60))}m`;
    return `${Math.floor(s / 86400)}d${two(Math.floor(s % 86400 / 3600))}h`;
  },
};

// A stream-time app's watermark (the row's `watermark`, observe.watermark), one line each: when it
// stands, its lag behind the newest stream time, the partition that holds it and since when, the
// idle partitions. "–": the app has no stream time (or no batch yet).
function watermarkLines(w) {
  if (!w) return ["–"];
  const lines = [w.watermark_ms == null ? "none yet" : fmt.time(w.watermark_ms)];
  if (w.lag_ms != null) lines.push(`lags ${fmt.span(w.lag_ms)}`);
  const h = w.holder;
  if (!h) lines.push("all partitions idle");
  else {
    lines.push(`held by ${h.topic}[${h.partition}]${h.stream_time_ms == null ? " (no event yet)" : ""}`);
    lines.push(`since batch ${h.since_batch}${h.since_exact ? "" : " or earlier"}` +
               (h.since_ms != null ? `, ${fmt.time(h.since_ms)}` : ""));
  }
  if (w.idle.length) lines.push(`idle: ${w.idle.map((i) => `${i.topic}[${i.partition}]`).join(", ")}`);
  return lines;
}

function badge(text) { return el("span", { class: `badge ${text}`, "data-health": text }, text); }

// The Airflow UI around this page (it is shown in the UI's iframe): open one of its routes there.
function airflowRoot() {
  // /<base>/streamops/... -> /<base>/ (the API server's base URL)
  const p = location.pathname; const i = p.lastIndexOf("/streamops/");
  return location.origin + (i >= 0 ? p.slice(0, i + 1) : "/");
}

// Open a route of the Airflow UI around this page. The UI's iframe is sandboxed without
// allow-top-navigation, so this page may not navigate the top window itself; a link that belongs
// to the (same-origin) parent document may: its navigation is the parent's own.
function openInAirflow(path) {
  const url = new URL(path, airflowRoot()).href;
  try {
    const doc = window.parent.document; const a = doc.createElement("a");
    a.href = url; doc.body.appendChild(a); a.click(); a.remove();
  } catch (e) { location.assign(url); }
}

// The DAG's trigger form, built from its own params (Airflow's REST API), with the app filled in;
// the run is created through the same API with the user's login (Airflow validates the params).
// Why not Airflow's own form: Airflow 3.3 has no URL that opens it pre-filled.
async function openTriggerForm(dagId, prefill = {}) {
  const api = `${airflowRoot()}api/v2/dags/${encodeURIComponent(dagId)}`;
  const dialog = document.getElementById("trigger") || document.body.appendChild(el("dialog", { id: "trigger" }));
  dialog.replaceChildren(el("div", { class: "muted" }, `loading ${dagId} …`));
  if (!dialog.open) dialog.showModal();
  let details;
  try { details = await getJson(`${api}/details`); } catch (e) {
    dialog.replaceChildren(el("div", { class: "error" }, String(e)), el("button", { onclick: () => dialog.close() }, "Close"));
    return;
  }
  const fields = Object.entries(details.params || {}).map(([name, p]) => {
    const schema = p.schema || {}; const types = [].concat(schema.type || "string");
    const value = name in prefill ? prefill[name] : p.value;
    let input;
    if (schema.enum) {
      input = el("select", { name }, schema.enum.map((v) => el("option", { value: v }, v)));
      input.value = value;
    } else if (types.includes("boolean")) {
      input = el("input", { name, type: "checkbox" }); input.checked = !!value;
    } else if (types.includes("integer") || types.includes("number")) {
      input = el("input", { name, type: "number", min: schema.minimum ?? "", max: schema.maximum ?? "" });
      input.value = value ?? "";
    } else {
      input = el("input", { name, type: "text" }); input.value = value ?? "";
    }
    input.dataset.types = types.join(",");
    return el("label", { class: "field", "data-param": name }, el("div", {}, schema.title || name), input,
      el("div", { class: "muted" }, p.description || ""));
  });
  const status = el("div", { class: "trigger-status" });
  const form = el("form", { method: "dialog", class: "trigger-form", "data-dag": dagId },
    el("h2", {}, `Trigger ${details.dag_display_name || dagId}`), el("div", { class: "muted" }, details.description || ""),
    ...fields, status,
    el("div", { class: "toolbar" }, el("button", { type: "submit", value: "trigger", class: "primary" }, "Trigger"),
      el("button", { type: "button", onclick: () => dialog.close() }, "Cancel")));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const conf = {};
    for (const input of form.querySelectorAll("[name]")) {
      const types = (input.dataset.types || "").split(",");
      if (input.type === "checkbox") conf[input.name] = input.checked;
      else if (input.value === "" && types.includes("null")) conf[input.name] = null;
      else if (input.type === "number") conf[input.name] = Number(input.value);
      else conf[input.name] = input.value;
    }
    status.textContent = "triggering …"; status.className = "trigger-status muted";
    const r = await fetch(`${api}/dagRuns`, { method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify({ logical_date: null, conf }) });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) {
      status.textContent = `refused (HTTP ${r.status}): ${typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail)}`;
      status.className = "trigger-status error";
      return;
    }
    status.replaceChildren("created ", el("a", { href: "#", onclick: (e) => { e.preventDefault(); openInAirflow(
      `dags/${encodeURIComponent(dagId)}/runs/${encodeURIComponent(body.dag_run_id)}`); } }, body.dag_run_id));
    status.className = "trigger-status"; status.dataset.runId = body.dag_run_id;
  });
  dialog.replaceChildren(form);
}

// -- a line chart in SVG, with markers ----------------------------------------------------------
const COLORS = ["#1570ef", "#12805c", "#b54708", "#c01048", "#6941c6", "#0e9384", "#dd2590", "#475467"];

function lineChart(title, series, { since, until, markers = [], unit = (v) => fmt.n(v, 1) } = {}) {
  const W = 600, H = 160, L = 56, R = 8, T = 8, B = 22;
  const svgNs = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNs, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`); svg.setAttribute("preserveAspectRatio", "none");
  const all = series.flatMap((s) => s.points.map((p) => p[1])).filter((v) => v != null);
  const hi = Math.max(1, ...all) * 1.08;
  const x = (t) => L + (W - L - R) * (t - since) / Math.max(1, until - since);
  const y = (v) => H - B - (H - T - B) * v / hi;
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(svgNs, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text != null) e.textContent = text;
    svg.append(e); return e;
  };
  for (const f of [0, 0.5, 1]) {
    add("line", { x1: L, x2: W - R, y1: y(hi / 1.08 * f), y2: y(hi / 1.08 * f), stroke: "currentColor", "stroke-opacity": 0.12 });
    add("text", { x: L - 4, y: y(hi / 1.08 * f) + 4, "text-anchor": "end", "font-size": 10, fill: "currentColor" }, unit(hi / 1.08 * f));
  }
  add("text", { x: L, y: H - 6, "font-size": 10, fill: "currentColor" }, new Date(since).toLocaleTimeString());
  add("text", { x: W - R, y: H - 6, "font-size": 10, "text-anchor": "end", fill: "currentColor" }, new Date(until).toLocaleTimeString());
  for (const m of markers) {
    const mx = x(m.at);
    if (mx < L || mx > W - R) continue;
    add("line", { x1: mx, x2: mx, y1: T, y2: H - B, stroke: "#c01048", "stroke-dasharray": "3 3", class: "marker", "data-kind": m.kind });
    add("text", { x: mx + 2, y: T + 9, "font-size": 9, fill: "#c01048" }, m.kind);
  }
  series.forEach((s, i) => {
    const pts = s.points.filter((p) => p[1] != null).map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`);
    if (pts.length) add("polyline", { points: pts.join(" "), fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 1.6 });
  });
  const legend = el("div", { class: "legend muted" }, series.map((s, i) =>
    el("span", {}, el("i", { style: `background:${COLORS[i % COLORS.length]}` }), s.name)));
  return el("div", { class: "chart", "data-chart": title }, el("h3", {}, title), svg, legend);
}
