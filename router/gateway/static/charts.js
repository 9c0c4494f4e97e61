// iqmesh dashboard charts: the time series of the snapshots' chart points (router/gateway/points.py)
// drawn by the vendored uPlot, each chart with a key of its own lines; the cluster events as numbered
// dashed lines (the numbers are in the events list). Loaded before dashboard.js, whose helpers
// ($, el, colour, clock) it calls once the page runs.
"use strict";

const KEEP_POINTS = 300;          // about five minutes of one-second snapshots
const CHART_HEIGHT = 230;
// event numbers above each plot: rows of this height, in the plot's top padding
const LABEL_ROWS = 2, LABEL_ROW_PX = 18;

// the per-instance charts and the field of a point's instance entry each draws
const PER_INSTANCE = {updates: "store_updates_per_s", records: "records_per_s", queries: "queries_per_s", lag: "lag",
                      getms: "get_ms"};
const METRICS = [...Object.keys(PER_INSTANCE), "plag"];
// the gateway's own figures and the cluster's totals: fixed lines, told apart by width and dash as
// much as by colour (the three error lines often all lie on 0)
const FIXED = {
  latency: [{key: "p50_ms", label: "p50", stroke: "#1a202c", width: 2.5},
            {key: "p99_ms", label: "p99", stroke: "#1a202c", width: 2, dash: [7, 4]}],
  errors: [{key: "client_errors_per_s", label: "gateway 4xx", stroke: "#d69e2e", width: 6},
           {key: "server_errors_per_s", label: "gateway 5xx", stroke: "#c0392b", width: 2.5, dash: [10, 6]},
           {key: "instance_errors_per_s", label: "instance query errors", stroke: "#6b46c1", width: 2.5, dash: [2, 6]}],
};
// units of each chart's values (the y axis says them)
const UNITS = {updates: "updates/s", records: "records/s", queries: "queries/s", lag: "records",
               latency: "ms", errors: "errors/s", plag: "records", ptopic: "records"};
// colours of the event markers (and of their badges in the events list)
const EVENT_COLOURS = {joined: "#2f855a", late: "#b7791f", back: "#2f855a", gone: "#c0392b", rebalance: "#b7791f",
                       restore: "#2c7a7b", restored: "#2c7a7b", error: "#c0392b", "dirty-close": "#c05621"};

const series = {t: [], ids: [], presence: {}, latency: {}, errors: {}, topics: [], ptopic: {}};
for (const m of METRICS) series[m] = {};
for (const name of Object.keys(FIXED)) for (const f of FIXED[name]) series[name][f.key] = [];
const charts = {};

// ---- cluster events, numbered in the order they happened (stable while the page is open) -------
let clusterEvents = [];  // the latest snapshot's list (timeline.py), oldest first
const eventNumbers = new Map();
const eventKey = (e) => `${e.at_ms}|${e.kind}|${e.instance}`;
const eventNumber = (e) => eventNumbers.get(eventKey(e));
function setEvents(events) {
  clusterEvents = events || [];
  for (const e of clusterEvents) if (!eventNumbers.has(eventKey(e))) eventNumbers.set(eventKey(e), eventNumbers.size + 1);
}
const inWindow = (e) => !series.t.length || e.at_ms / 1000 >= series.t[0];

// ---- points ---------------------------------------------------------------------------------
const nothing = (v) => v === undefined || v === null;

// one snapshot's point: per instance its figures (null while it is gone: the line breaks there),
// the gateway's, the processing lag per instance and per topic
function addPoint(p) {
  if (!p || nothing(p.t) || (series.t.length && p.t <= series.t[series.t.length - 1])) return;
  const rates = p.rates || {}, plag = p.processing_lag || {};
  const byInstance = plag.by_instance || {}, byTopic = plag.by_topic || {};
  for (const topic of Object.keys(byTopic)) {
    if (!series.topics.includes(topic)) {
      series.topics.push(topic);
      series.ptopic[topic] = new Array(series.t.length).fill(null);
    }
  }
  for (const topic of series.topics) series.ptopic[topic].push(nothing(byTopic[topic]) ? null : byTopic[topic]);
  const errors = Object.values(rates).map((r) => r.query_errors_per_s).filter((v) => !nothing(v));
  const g = {...(p.gateway || {}), instance_errors_per_s: errors.length ? errors.reduce((a, b) => a + b, 0) : null};
  for (const name of Object.keys(FIXED)) for (const f of FIXED[name]) series[name][f.key].push(nothing(g[f.key]) ? null : g[f.key]);
  series.t.push(p.t);
  for (const id of Object.keys(rates)) {
    if (!series.ids.includes(id)) {
      series.ids.push(id);
      for (const m of METRICS) series[m][id] = new Array(series.t.length - 1).fill(null);
    }
  }
  for (const id of series.ids) {
    const r = rates[id];
    series.presence[id] = r ? r.presence : "gone";  // no longer listed: gone
    for (const [m, field] of Object.entries(PER_INSTANCE)) series[m][id].push(r && !nothing(r[field]) ? r[field] : null);
    series.plag[id].push(r && r.presence !== "gone" && !nothing(byInstance[id]) ? byInstance[id] : null);
  }
  if (series.t.length > KEEP_POINTS) {
    series.t.shift();
    for (const m of METRICS) for (const id of series.ids) series[m][id].shift();
    for (const name of Object.keys(FIXED)) for (const f of FIXED[name]) series[name][f.key].shift();
    for (const topic of series.topics) series.ptopic[topic].shift();
  }
}

// ---- event markers: a dashed line each, its number above the plot -----------------------------
// numbers closer than this many pixels share one label ("4-7"); labels go in the first row where
// they cover no other
const GROUP_PX = 16, LABEL_GAP_PX = 3;

function placeEventLabels(u) {
  for (const old of u.over.querySelectorAll(".event-label")) old.remove();
  const shown = clusterEvents.map((e) => ({e, x: u.valToPos(e.at_ms / 1000, "x")}))
    .filter((v) => v.x >= -1 && v.x <= u.over.clientWidth + 1);
  const groups = [];
  for (const v of shown) {
    const last = groups[groups.length - 1];
    if (last && v.x - last.x < GROUP_PX) last.items.push(v); else groups.push({x: v.x, items: [v]});
  }
  const rows = Array.from({length: LABEL_ROWS}, () => []);
  for (const g of groups) {
    const numbers = g.items.map((v) => eventNumber(v.e));
    const text = numbers.length > 1 ? `${numbers[0]}-${numbers[numbers.length - 1]}` : String(numbers[0]);
    const label = el("div", {class: "event-label", "data-events": numbers.join(" "),
                             title: g.items.map((v) => `${eventNumber(v.e)}: ${v.e.text}`).join("\n"),
                             style: `background:${EVENT_COLOURS[g.items[0].e.kind] || "#4a5568"}`}, text);
    u.over.append(label);
    const w = label.offsetWidth, lo = g.x - w / 2 - LABEL_GAP_PX, hi = g.x + w / 2 + LABEL_GAP_PX;
    const cover = rows.map((r) => r.reduce((a, [x0, x1]) => a + Math.max(0, Math.min(hi, x1) - Math.max(lo, x0)), 0));
    let row = cover.indexOf(0);
    if (row < 0) row = cover.indexOf(Math.min(...cover));
    rows[row].push([lo, hi]);
    label.style.left = `${g.x - w / 2}px`;
    label.style.top = `${-LABEL_ROW_PX * (row + 1)}px`;
  }
}

// a uPlot plugin drawing each cluster event as a dashed vertical line over the plot, numbered above it
const eventMarkers = {hooks: {draw: [(u) => {
  const ctx = u.ctx, top = u.bbox.top, bottom = u.bbox.top + u.bbox.height;
  ctx.save();
  ctx.setLineDash([5, 4]);
  ctx.lineWidth = 1.5 * devicePixelRatio;
  for (const e of clusterEvents) {
    const x = Math.round(u.valToPos(e.at_ms / 1000, "x", true));
    if (x < u.bbox.left - 1 || x > u.bbox.left + u.bbox.width + 1) continue;
    ctx.strokeStyle = EVENT_COLOURS[e.kind] || "#4a5568";
    ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, bottom); ctx.stroke();
  }
  ctx.restore();
  placeEventLabels(u);
}]}};

// ---- charts -----------------------------------------------------------------------------------
const TOPIC_PALETTE = ["#2c7a7b", "#975a16", "#b83280", "#4a5568", "#2b6cb0", "#c05621"];
const topicColours = new Map();
function topicColour(topic) {
  if (!topicColours.has(topic)) topicColours.set(topic, TOPIC_PALETTE[topicColours.size % TOPIC_PALETTE.length]);
  return topicColours.get(topic);
}

// the lines of a chart: {id, label, stroke, width, dash, data}
function linesOf(name) {
  const fixed = (FIXED[name] || []).map((f) => ({...f, id: f.key, data: series[name][f.key]}));
  if (name === "latency") {  // the gateway's quantiles, then each instance's own mean Get
    const positive = (data) => data.map((v) => nothing(v) ? v : Math.max(v, MIN_MS));  // a log scale
    return [...fixed, ...series.ids.map((id) => ({id: `get ${id}`, label: id, stroke: colour(id), width: 1.5,
                                                  data: positive(series.getms[id])}))];
  }
  if (FIXED[name]) return fixed;
  if (name === "ptopic") return series.topics.map((t) => ({id: t, label: t, stroke: topicColour(t), width: 2, data: series.ptopic[t]}));
  return series.ids.map((id) => ({id, label: id, stroke: colour(id), width: 2, data: series[name][id]}));
}

// the latency chart: log scale, whole decades, so an instance's sub-millisecond Gets and the
// gateway's tens of milliseconds both read
const MIN_MS = 0.001;
const LOG_Y = {distr: 3, log: 10, range: (u, lo, hi) => {
  if (nothing(lo) || nothing(hi) || hi <= 0) return [0.1, 100];
  const low = 10 ** Math.floor(Math.log10(Math.max(lo / 1.5, MIN_MS)));  // room below the lowest line
  return [low, Math.max(10 * low, 10 ** Math.ceil(Math.log10(hi * 1.2)))];
}};

// a y tick: at most two decimals, one significant digit below 0.01; none where a log axis skips one
const tick = (v) => nothing(v) ? "" : v > 0 && v < 0.01 ? String(+v.toPrecision(1)) : String(+v.toFixed(2));

function drawChart(name, target) {
  const lines = linesOf(name);
  const ids = lines.map((l) => l.id);
  const data = [series.t, ...lines.map((l) => l.data)];
  const box = $(target);
  const width = Math.max(300, box.clientWidth || 400);
  const c = charts[name];
  if (c && c.ids.join("|") === ids.join("|")) {
    if (Math.abs(c.plot.width - width) > 4) c.plot.setSize({width, height: CHART_HEIGHT});
    c.plot.setData(data);
    return;
  }
  if (c) c.plot.destroy();
  box.textContent = "";
  const opts = {
    width, height: CHART_HEIGHT,
    padding: [LABEL_ROWS * LABEL_ROW_PX + 4, null, null, null],
    scales: {x: {time: true}, y: name === "latency" ? LOG_Y : {range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)]}},
    // no line across a gap: an instance gone, the cluster unreachable, no query answered
    series: [{}, ...lines.map((l) => ({label: l.label, stroke: l.stroke, width: l.width, dash: l.dash, spanGaps: false}))],
    plugins: [eventMarkers],
    axes: [
      {space: 90, values: (u, splits) => splits.map((v) => clock(new Date(v * 1000)))},
      {size: 70, label: UNITS[name], labelSize: 18,
       values: (u, splits) => splits.map(tick)},
    ],
    legend: {show: false},  // each chart's key is beside its title
  };
  charts[name] = {ids, plot: new uPlot(opts, data, box)};
}

function drawCharts() {
  for (const name of ["updates", "records", "queries", "lag", "plag", "ptopic", "latency", "errors"]) {
    drawChart(name, `#chart-${name}`);
  }
  renderKeys();
  renderErrorsNote();
}

// ---- keys: each chart's lines named beside its title -----------------------------------------
function keyItem(label, stroke, width, dash, attrs) {
  const style = `border-top:${Math.min(4, Math.max(2, width || 2))}px ${dash ? (dash[0] <= 3 ? "dotted" : "dashed") : "solid"} ${stroke}`;
  return el("span", {class: "key", ...attrs}, el("span", {class: "swatch", style}), label);
}

function fillKey(box, signature, items) {
  if (box.dataset.signature === signature) return;
  box.dataset.signature = signature;
  box.textContent = "";
  box.append(...items());
}

function instanceKeys() {
  return series.ids.map((id) => {
    const gone = series.presence[id] === "gone";
    return keyItem(id, colour(id), 2, null, {"data-instance": id, class: gone ? "key gone" : "key",
                                             title: gone ? `${id} is gone: no line while it is away` : id});
  });
}

function renderKeys() {
  const signature = series.ids.map((id) => `${id}:${series.presence[id]}`).join("|");
  for (const name of ["updates", "records", "queries", "lag", "plag"]) fillKey($(`#key-${name}`), signature, instanceKeys);
  fillKey($("#key-latency-instances"), signature, instanceKeys);
  fillKey($("#key-ptopic"), series.topics.join("|"), () => series.topics.map((t) => keyItem(t, topicColour(t), 2)));
  for (const name of Object.keys(FIXED)) {
    fillKey($(`#key-${name}`), "fixed", () => FIXED[name].map((f) => keyItem(f.label, f.stroke, f.width, f.dash)));
  }
}

// the error lines lie on each other at 0: say so rather than let one line stand for three
function renderErrorsNote() {
  const values = FIXED.errors.flatMap((f) => series.errors[f.key]).filter((v) => !nothing(v));
  const note = $("#errors-note");
  const none = values.every((v) => v === 0);
  note.textContent = !values.length ? "no figures yet" : none ? "no errors in this window: the three lines lie on 0" : "";
  note.className = none ? "note" : "note hidden";
}
