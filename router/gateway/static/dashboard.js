// iqmesh dashboard: live snapshots from /v1/events (SSE), lookups and scans through the /v1 API.
// Plain browser JavaScript, no build step; the charts are charts.js's (the vendored uPlot).
"use strict";

const TOP_REFRESH_MS = 3000;
const PALETTE = ["#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b83280", "#2c7a7b", "#975a16", "#4a5568"];

const $ = (sel) => document.querySelector(sel);

// el("td", {class: "num"}, "text", childNode): DOM without innerHTML, so keys and ids are never markup.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const badge = (text, cls) => el("span", {class: `badge ${cls || text}`}, text);
const fmt = (x, digits = 1) => (x === undefined || x === null) ? "–" : Number(x).toFixed(digits).replace(/\.0+$/, "");
const enc = encodeURIComponent;

// ---- colours per instance, stable while the page is open ------------------------------------
const colours = new Map();
function colour(id) {
  if (!colours.has(id)) colours.set(id, PALETTE[colours.size % PALETTE.length]);
  return colours.get(id);
}

const pad2 = (n) => String(n).padStart(2, "0");
// 24-hour clock, day before month: the same whatever the browser's locale
const clock = (d) => `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
const day = (d) => `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())}`;

// ---- cluster events: the list, numbered as on the charts (charts.js) --------------------------
function renderEvents(snap) {
  setEvents(snap.events);
  const body = $("#events tbody");
  body.textContent = "";
  // those the charts show (the newest 30), else the latest 12
  const inView = clusterEvents.filter(inWindow);
  const recent = (inView.length ? inView.slice(-30) : clusterEvents.slice(-12)).reverse();
  if (!recent.length) {
    body.append(el("tr", {}, el("td", {colspan: 3, class: "muted"},
      "none since the gateway started (joins, departures, rebalances, restores and dirty closes show here and on the charts)")));
    return;
  }
  for (const e of recent) {
    const d = new Date(e.at_ms);
    const tint = EVENT_COLOURS[e.kind] || "#4a5568";
    body.append(el("tr", {"data-event": e.kind, "data-n": eventNumber(e)},
      el("td", {class: "num"}, `${day(d)} ${clock(d)}`),
      el("td", {}, el("span", {class: "event-n", style: `border-color:${tint};color:${tint}`}, eventNumber(e)),
         el("span", {class: "badge", style: `background:${tint};color:#fff`}, e.kind)),
      el("td", {}, e.text)));
  }
}

// ---- topology: sub-topologies with their topics and stores, and the input lag ----------------
let drawnTopology = "";
function renderTopology(snap) {
  const topo = snap.topology || {};
  const lagOf = (snap.processing_lag && snap.processing_lag.by_topic) || {};
  const text = JSON.stringify([topo, lagOf, snap.topology_error || ""]);
  if (text === drawnTopology) return;
  drawnTopology = text;
  const box = $("#topology");
  box.textContent = "";
  box.className = "topology";
  if (!topo.subtopologies) {
    box.append(el("div", {class: "muted"}, snap.topology_error || "not described yet…"));
    return;
  }
  // which sub-topology writes and which reads each topic: repartition topics link them
  const writers = {}, readers = {};
  for (const st of topo.subtopologies) {
    for (const t of st.sink_topics) (writers[t] = writers[t] || []).push(st.id);
    for (const t of st.source_topics) (readers[t] = readers[t] || []).push(st.id);
  }
  const chip = (topic, kind, extra) => el("span", {class: `topic ${kind}`, "data-topic": topic, title: kind}, topic, extra || null);
  for (const st of topo.subtopologies) {
    const repart = new Set(st.repartition_topics);
    const sources = st.source_topics.map((t) => el("div", {},
      chip(t, repart.has(t) ? "repartition" : "input",
           lagOf[t] !== undefined ? el("span", {class: "lag", "data-lag": lagOf[t]}, ` lag ${lagOf[t]}`) : null),
      writers[t] ? el("span", {class: "muted"}, ` ← sub-topology ${writers[t].join(", ")}`) : null));
    const stores = st.stores.map((s, i) => el("div", {},
      el("span", {class: "store"}, s),
      st.changelog_topics[i] ? el("div", {}, el("span", {class: "muted"}, "changelog "), chip(st.changelog_topics[i], "changelog")) : null));
    const sinks = st.sink_topics.map((t) => el("div", {},
      chip(t, repart.has(t) ? "repartition" : "output"),
      readers[t] ? el("span", {class: "muted"}, ` → sub-topology ${readers[t].join(", ")}`) : null));
    box.append(el("div", {class: "subtopology", "data-subtopology": st.id},
      el("h3", {}, `Sub-topology ${st.id} `, el("span", {class: "muted"}, `(${st.tasks} tasks)`)),
      el("div", {class: "flow"},
        el("div", {class: "col"}, el("div", {class: "head"}, "sources"), sources.length ? sources : el("span", {class: "muted"}, "none")),
        el("div", {class: "arrow"}, "→"),
        el("div", {class: "col"}, el("div", {class: "head"}, "stores"), stores.length ? stores : el("span", {class: "muted"}, "none")),
        el("div", {class: "arrow"}, "→"),
        el("div", {class: "col"}, el("div", {class: "head"}, "sinks"), sinks.length ? sinks : el("span", {class: "muted"}, "none")))));
  }
  for (const g of topo.global_stores) {
    box.append(el("div", {class: "subtopology", "data-global-store": g.store},
      el("h3", {}, `Global store ${g.store}`), el("div", {}, chip(g.topic, "input"), " → every instance's copy")));
  }
  if (snap.topology_error) box.append(el("div", {class: "muted"}, snap.topology_error));
  $("#topology-text").textContent = topo.description || "";
}

// ---- instances and partitions -------------------------------------------------------------
function renderInstances(snap) {
  const plag = (snap.processing_lag && snap.processing_lag.by_instance) || {};
  const body = $("#instances tbody");
  body.textContent = "";
  for (const i of snap.instances) {
    // presence (timeline.py): late while its heartbeat is older than a few intervals, gone after
    // its session timeout or once it stopped or failed
    const state = i.presence === "alive" ? badge(i.state)
      : i.presence === "late" ? badge(`${i.state} (late)`, "warn") : badge(`${i.state} (gone)`, "dead");
    body.append(el("tr", {"data-instance": i.instance_id},
      el("td", {}, el("span", {class: "dot", style: `background:${colour(i.instance_id)}`}),
         el("strong", {}, i.instance_id), el("div", {class: "muted"}, i.endpoint)),
      el("td", {class: "state"}, state),
      el("td", {class: "num"}, `${fmt(i.heartbeat_age_ms / 1000)} s`),
      el("td", {class: "tasks"}, i.active_tasks.join(" ") || "–"),
      el("td", {class: "tasks"}, i.standby_tasks.join(" ") || "–"),
      el("td", {class: "tasks"}, i.restoring_tasks.join(" ") || "–"),
      el("td", {class: "num"}, fmt(i.records_per_s)),
      el("td", {class: "num"}, fmt(i.store_updates_per_s)),
      el("td", {class: "num"}, fmt(i.queries_per_s)),
      el("td", {class: "num"}, fmt(i.lag, 0)),
      el("td", {class: "num plag"}, fmt(plag[i.instance_id], 0))));
  }
}

function replica(r) {
  if (!r) return badge("no live owner", "bad");
  return el("span", {"data-replica": r.instance_id},
            el("span", {class: "dot", style: `background:${colour(r.instance_id)}`}), r.instance_id, " ",
            badge(r.role), el("span", {class: "muted"}, ` @${r.position}`),
            r.lag > 0 ? el("span", {class: "muted"}, ` lag ${r.lag}`) : null);
}

function renderPartitions(snap) {
  const box = $("#partitions");
  box.textContent = "";
  box.className = "";
  for (const s of snap.stores) {
    const rows = s.replicas.map((p) => el("tr", {"data-partition": p.partition},
      el("td", {class: "num"}, p.partition), el("td", {class: "owner"}, replica(p.active)),
      el("td", {class: "owner"}, p.standbys.length ? p.standbys.map((r) => el("div", {}, replica(r)))
                                                   : el("span", {class: "muted"}, "none"))));
    box.append(el("h3", {}, `${s.store} `, el("span", {class: "muted"}, `(${s.partitions} partitions)`)),
               el("table", {class: "grid-part", "data-store": s.store},
                  el("thead", {}, el("tr", {}, el("th", {class: "num"}, "partition"), el("th", {}, "active"),
                                     el("th", {}, "standbys"))),
                  el("tbody", {}, rows)));
  }
}

function fillStoreSelect(sel, stores) {
  const names = stores.map((s) => s.store);
  const have = [...sel.options].map((o) => o.value);
  if (names.join("|") === have.join("|")) return;
  const keep = sel.value;
  sel.textContent = "";
  for (const n of names) sel.append(el("option", {value: n}, n));
  if (names.includes(keep)) sel.value = keep;
}

let lastSnapshot = null;
function onSnapshot(snap) {
  lastSnapshot = snap;
  const conn = $("#conn");
  conn.textContent = snap.error ? "cluster unreachable" : "live";
  conn.className = `badge ${snap.error ? "bad" : "ok"}`;
  $("#source").textContent = snap.error
    ? snap.error : `routing table of ${snap.asked} via ${snap.via}, ${fmt(snap.age_ms / 1000)} s old`;
  // the chart points (points.py): the recent ones first, then one per snapshot, a gap when the
  // cluster is unreachable
  for (const p of snap.history || []) addPoint(p);
  addPoint(snap.point);
  renderEvents(snap);
  renderTopology(snap);
  renderInstances(snap);
  renderPartitions(snap);
  fillStoreSelect($("#lookup-store"), snap.stores);
  fillStoreSelect($("#top-store"), snap.stores);
  drawCharts();
}

// ?screenshot: one snapshot, no open event stream and no timers, so a headless browser's
// --virtual-time-budget screenshot can finish (an open stream keeps its virtual time from running
// out). Chromium's own `--headless --screenshot` (HeadlessChrome, not driven by WebDriver) gets the
// same without the parameter; ?live keeps the stream in any browser.
const PARAMS = new URLSearchParams(location.search);
const SCREENSHOT = PARAMS.has("screenshot") ||
  (!PARAMS.has("live") && /HeadlessChrome/.test(navigator.userAgent) && !navigator.webdriver);

async function snapshotOnce() {
  const text = await (await fetch("/v1/events?max_events=1")).text();
  const data = text.split("\n").find((l) => l.startsWith("data: "));
  if (data) onSnapshot(JSON.parse(data.slice(6)));
}

function connect() {
  if (SCREENSHOT) { snapshotOnce(); return; }
  const es = new EventSource("/v1/events");
  es.addEventListener("snapshot", (e) => onSnapshot(JSON.parse(e.data)));
  es.onerror = () => { const c = $("#conn"); c.textContent = "reconnecting…"; c.className = "badge off"; };
}

// ---- key lookup -----------------------------------------------------------------------------
// what the instance the gateway asked did with the lookup, from what the answer says (never assumed)
function answeredHow(via, m) {
  if (m.forwarded) return `(forwarded one hop to ${m.served_by} at ${m.endpoint})`;
  return via === m.endpoint ? "(answered itself)" : `(answered by ${m.served_by} at ${m.endpoint})`;
}
function errorCard(box, body, status) {
  const e = (body && body.error) || {code: `HTTP ${status}`, message: ""};
  box.className = "card error";
  box.textContent = "";
  box.append(el("div", {"data-field": "error"}, `${e.code}${e.reason ? ` (${e.reason})` : ""}: ${e.message}`),
             e.tried && e.tried.length ? el("div", {class: "muted"}, `tried ${e.tried.join(", ")}`) : null);
}

async function lookup(ev) {
  ev.preventDefault();
  const store = $("#lookup-store").value, key = $("#lookup-key").value;
  const box = $("#lookup-result");
  if (!store || !key) return;
  const stale = $("#lookup-stale").checked;
  box.className = "card muted";
  box.textContent = "…";
  let res, body;
  try {
    res = await fetch(`/v1/stores/${enc(store)}/keys/${enc(key)}${stale ? "?allow_stale=true" : ""}`);
    body = await res.json();
  } catch (err) {
    errorCard(box, {error: {code: "NETWORK", message: String(err)}}, 0);
    return;
  }
  if (!res.ok) { errorCard(box, body, res.status); return; }
  const m = body.metadata;
  box.className = "card";
  box.textContent = "";
  box.append(
    el("div", {class: "value", "data-field": "value"}, body.found ? JSON.stringify(body.value) : "not found"),
    el("dl", {},
      el("dt", {}, "served by"), el("dd", {"data-field": "served_by"}, m.served_by),
      el("dt", {}, "role"), el("dd", {"data-field": "role"}, badge(m.role)),
      el("dt", {}, "fresh"), el("dd", {"data-field": "stale"}, m.stale ? badge("stale", "stale") : badge("up to date", "fresh")),
      el("dt", {}, "partition"), el("dd", {"data-field": "partition"}, m.partition),
      el("dt", {}, "position / lag"), el("dd", {}, `${m.position} / ${m.lag}`),
      el("dt", {}, "asked"), el("dd", {"data-field": "via"}, `${body.via} ${answeredHow(body.via, m)}`),
      el("dt", {}, "position token"), el("dd", {class: "muted"}, m.position_token)));
}

// ---- top entries: a whole-store scan, ranked by value ---------------------------------------
async function refreshTop() {
  const store = $("#top-store").value;
  const n = Math.max(1, Math.min(100, Number($("#top-n").value) || 15));
  const status = $("#top-status");
  if (!store || document.hidden) return;
  const stale = $("#top-stale").checked ? "&allow_stale=true" : "";
  let text, res;
  try {
    res = await fetch(`/v1/stores/${enc(store)}/all?limit=10000${stale}`);
    text = await res.text();
  } catch (err) { status.textContent = String(err); return; }
  if (!res.ok) {
    let e = {}; try { e = JSON.parse(text).error || {}; } catch (_) { /* not JSON */ }
    status.textContent = `${e.code || res.status}: ${e.message || ""}`;
    return;
  }
  const entries = [];
  let end = null, failed = null;
  for (const line of text.split("\n")) {
    if (!line) continue;
    const o = JSON.parse(line);
    if (o.end) end = o.end; else if (o.error) failed = o.error; else entries.push(o);
  }
  const numeric = entries.every((e) => typeof e.value === "number");
  if (numeric) entries.sort((a, b) => b.value - a.value);
  const body = $("#top-table tbody");
  body.textContent = "";
  entries.slice(0, n).forEach((e, i) => body.append(el("tr", {},
    el("td", {class: "num"}, i + 1), el("td", {}, JSON.stringify(e.key)),
    el("td", {class: "num"}, typeof e.value === "number" ? e.value : JSON.stringify(e.value)),
    el("td", {class: "num"}, e.partition))));
  const now = new Date();
  const when = `${day(now)} ${clock(now)}`;
  if (failed) { status.textContent = `${failed.code}: ${failed.message}`; return; }
  const stalePs = end.partitions.filter((p) => p.stale).map((p) => p.partition);
  const missing = end.partitions.filter((p) => !p.available).map((p) => `${p.partition} (${p.reason})`);
  status.textContent = `${end.count} entries scanned${numeric ? ", ranked by value" : ", in key order"}; ` +
    (end.complete ? "complete" : `missing partitions ${missing.join(", ")}`) +
    (stalePs.length ? `; stale partitions ${stalePs.join(", ")}` : "") + `; at ${when}`;
}

document.addEventListener("DOMContentLoaded", () => {
  $("#lookup").addEventListener("submit", lookup);
  for (const id of ["#top-store", "#top-n", "#top-stale"]) $(id).addEventListener("change", refreshTop);
  window.addEventListener("resize", () => { if (lastSnapshot) drawCharts(); });
  connect();
  if (SCREENSHOT) { setTimeout(refreshTop, 300); return; }
  setInterval(refreshTop, TOP_REFRESH_MS);
  setTimeout(refreshTop, 1200);
});
