// zlink-trio dashboard: polls the JSON of zlink_trio/cli/dashboard_app.py and draws it.
// Everything is written with textContent (never innerHTML) except the chart SVG, which
// the dashboard itself drew (statecharts/svg.py).
"use strict";

const state = {
  refresh: 1000,      // ms between polls (--refresh)
  spotId: null,       // the Spot shown, refreshed with every poll
  spotMesh: null,
  servers: [],        // NodeIds that may host Spots, for the Relocate picker
  chart: null,        // the chart shown
  records: [],        // its trace, replayed
  step: 0,            // 0: before the first record; i: after record i
  timer: null,        // Play
  relocate: false,    // whether the dashboard offers the Relocate button
};

const $ = (id) => document.getElementById(id);

class ApiError extends Error {}

async function api(path, options) {
  let response;
  try {
    response = await fetch(path, { cache: "no-store", ...options });
  } catch (error) {
    throw new ApiError(`the dashboard does not answer (${error.message}); is it still running?`);
  }
  const type = response.headers.get("content-type") || "";
  if (!type.startsWith("application/json")) {
    if (!response.ok) throw new ApiError(`${path}: HTTP ${response.status}`);
    return response.text();
  }
  const body = await response.json();
  if (body && body.error) throw new ApiError(body.error.message);
  if (!response.ok) throw new ApiError(`${path}: HTTP ${response.status}`);
  return body;
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function fill(tableId, emptyId, items, draw) {
  const body = $(tableId).querySelector("tbody");
  const rows = items.map((item) => {
    const row = document.createElement("tr");
    draw(row, item);
    return row;
  });
  body.replaceChildren(...rows);
  $(tableId).hidden = items.length === 0;
  $(emptyId).hidden = items.length !== 0;
}

function byState(counts) {
  return Object.entries(counts).map(([s, n]) => `${s} ${n}`).join(", ");
}

function showError(message) {
  const banner = $("error");
  banner.textContent = message;
  banner.hidden = false;
}

function node(end) {
  if (!end) return "";
  const name = end.nodeId === null ? `(rid ${end.nodeRid})` : end.nodeId;
  return `${name}/${end.lifecycleGeneration}`;
}

function drawOverview(view) {
  const complete = view.spotsComplete;
  const spots = (n) => (complete ? String(n) : `>=${n}`);
  fill("nodes", "nodes-empty", view.nodes, (row, n) => {
    row.dataset.nodeId = n.nodeId;
    row.dataset.mesh = n.mesh;
    if (!n.acceptsPlacements) row.className = "draining";
    cell(row, n.nodeId, "node-id");
    cell(row, n.mesh);
    cell(row, n.lifecycleGeneration, "num");
    cell(row, n.endpoint, "mono");
    cell(row, n.roles.map((r) => r.replace(/^object_/, "")).sort().reverse().join(","), "roles");
    cell(row, `${Number(n.leaseLeft).toFixed(1)}s`, "num lease");
    cell(row, n.placementWeight, "num weight");
    cell(row, n.acceptsPlacements ? "open" : "draining", "placement");
    cell(row, spots(n.spots), "num spots");
    cell(row, byState(n.spotsByState), "by-state");
  });
  $("node-count").textContent = `(${view.nodes.length})`;
  fill("dead", "dead-empty", view.deadLifecycles, (row, d) => {
    row.dataset.nodeRid = d.nodeRid;
    cell(row, d.nodeId === null ? `(rid ${d.nodeRid})` : d.nodeId, "node-id");
    cell(row, d.mesh === null ? "?" : d.mesh);
    cell(row, d.lifecycleGeneration, "num");
    cell(row, d.leaseExpiresAt === null ? "?" : d.leaseExpiresAt);
    cell(row, spots(d.spots), "num spots");
    cell(row, d.release, "mono");
  });
  $("dead-count").textContent = `(${view.deadLifecycles.length})`;
  fill("moves", "moves-empty", view.moves, (row, m) => {
    row.dataset.spotId = m.spotId;
    cell(row, m.spotId, "mono");
    cell(row, m.kind);
    cell(row, m.stableType);
    cell(row, m.state, "state");
    cell(row, node(m.source), "source");
    cell(row, node(m.target), "target");
  });
  $("move-count").textContent = `(${view.moves.length})`;
  $("records-read").textContent =
    `${view.recordsRead} record(s) read${complete ? "" : " (stopped early: counts are lower bounds)"}`;
  $("updated").textContent = new Date().toLocaleTimeString();
  state.servers = view.nodes.filter((n) => n.roles.includes("object_server")
    && n.acceptsPlacements).map((n) => n.nodeId);
}

// -- one Spot -------------------------------------------------------------------------

function spotFields(r) {
  const lease = r.ownerLease.live
    ? `live until ${new Date(r.ownerLease.expiresAt * 1000).toISOString()}`
    : "not live: no current claim of that lifecycle";
  return [
    ["spotId", "spot id", r.spotId],
    ["kind", "kind", r.kind],
    ["stableType", "stable type", r.stableType],
    ["mesh", "mesh", r.mesh],
    ["state", "state", r.state],
    ["objectGeneration", "object generation", r.objectGeneration],
    ["ownerGeneration", "owner generation", r.ownerGeneration],
    ["owner", "owner", r.owner.shown],
    ["ownerLease", "owner lease", lease],
    ["relocationTarget", "relocation target",
      r.relocationTarget === null ? "none"
        : `${r.relocationTargetNode ?? "(rid " + r.relocationTarget.nodeRid + ")"}`
          + `/${r.relocationTarget.lifecycleGeneration}`],
    ["storeVersion", "store version", r.storeVersion],
  ];
}

async function refreshSpot() {
  if (state.spotId === null) return;
  const shown = state.spotId;
  let record;
  try {
    record = await api(`/api/spot/${encodeURIComponent(shown)}`);
  } catch (error) {
    if (state.spotId !== shown) return;
    $("spot-error").textContent = error.message;
    $("spot-error").hidden = false;
    $("spot-record").hidden = true;
    $("relocate-form").hidden = true;
    return;
  }
  if (state.spotId !== shown) return;
  $("spot-error").hidden = true;
  const rows = spotFields(record).map(([key, label, value]) => {
    const row = document.createElement("tr");
    row.dataset.field = key;
    const th = document.createElement("th");
    th.textContent = label;
    row.appendChild(th);
    cell(row, value);
    return row;
  });
  $("spot-record").querySelector("tbody").replaceChildren(...rows);
  $("spot-record").hidden = false;
  state.spotMesh = record.mesh;
  if (state.relocate) {
    drawRelocateTargets(record.ownerNode);
    $("relocate-form").hidden = false;
  }
}

function drawRelocateTargets(owner) {
  const select = $("relocate-to");
  const chosen = select.value;
  const options = [["", "(placement picks)"],
    ...state.servers.filter((id) => id !== owner).map((id) => [id, id])];
  if (select.options.length === options.length
      && [...select.options].every((o, i) => o.value === options[i][0])) return;
  select.replaceChildren(...options.map(([value, label]) => {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = label;
    return option;
  }));
  if (options.some(([value]) => value === chosen)) select.value = chosen;
}

async function relocate(event) {
  event.preventDefault();
  const to = $("relocate-to").value || null;
  $("relocate-result").textContent = "relocating...";
  try {
    const result = await fetch(`/api/relocate/${encodeURIComponent(state.spotId)}`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ to }),
    }).then((r) => r.json());
    $("relocate-result").textContent = result.error ? result.error.message
      : result.outcome === "committed" ? `relocated to ${result.node}`
        : `${result.outcome}: ${result.reason}`;
  } catch (error) {
    $("relocate-result").textContent = error.message;
  }
  await refreshSpot();
}

// -- the charts and the replay -----------------------------------------------------------

function svgRoot() { return $("chart-svg").querySelector("svg"); }

function drawStep() {
  const root = svgRoot();
  const records = state.records;
  const n = records.length;
  $("prev").disabled = n === 0 || state.step === 0;
  $("next").disabled = n === 0 || state.step === n;
  $("play").disabled = n === 0;
  if (!root) return;
  for (const g of root.querySelectorAll("g.state, g.transition")) {
    g.classList.remove("current", "visited", "taken");
  }
  if (n === 0) {
    $("step").textContent = "no trace loaded";
    delete $("chart-svg").dataset.currentState;
    return;
  }
  const current = state.step === 0 ? records[0].state : records[state.step - 1].target;
  const visited = new Set([records[0].state]);
  for (const r of records.slice(0, state.step)) visited.add(r.target);
  for (const g of root.querySelectorAll("g.state")) {
    if (g.dataset.state === current) g.classList.add("current");
    else if (visited.has(g.dataset.state)) g.classList.add("visited");
  }
  if (state.step > 0) {
    const r = records[state.step - 1];
    for (const g of root.querySelectorAll("g.transition")) {
      if (g.dataset.source === r.state && g.dataset.event === r.event) g.classList.add("taken");
    }
    $("step").textContent = `step ${state.step} of ${n}: ${r.state} --${r.event}--> ${r.target}`;
  } else {
    $("step").textContent = `step 0 of ${n}: start in ${current}`;
  }
  $("chart-svg").dataset.currentState = current;
  $("chart-svg").dataset.step = String(state.step);
}

function setTrace(records) {
  stop();
  state.records = records;
  state.step = 0;
  $("trace-error").hidden = true;
  drawStep();
}

function stop() {
  if (state.timer !== null) clearInterval(state.timer);
  state.timer = null;
  $("play").textContent = "Play";
}

function play() {
  if (state.timer !== null) { stop(); return; }
  if (state.step === state.records.length) state.step = 0;
  $("play").textContent = "Pause";
  drawStep();
  state.timer = setInterval(() => {
    if (state.step >= state.records.length) { stop(); return; }
    state.step += 1;
    drawStep();
  }, 800);
}

function traceError(message) {
  $("trace-error").textContent = message;
  $("trace-error").hidden = false;
}

async function loadChart(name) {
  stop();
  state.chart = name;
  state.records = [];
  state.step = 0;
  try {
    const text = await api(`/api/charts/${encodeURIComponent(name)}.svg`);
    if (state.chart !== name) return;
    $("chart-svg").innerHTML = text;  // drawn by the dashboard itself
    $("chart-svg").dataset.chart = name;
    const trace = await api(`/api/charts/${encodeURIComponent(name)}/trace`);
    if (state.chart === name) setTrace(trace.records);
  } catch (error) {
    traceError(error.message);
    drawStep();
  }
}

async function loadTraceFile() {
  const file = $("trace-file").files[0];
  if (!file || state.chart === null) return;
  try {
    const trace = await api(`/api/charts/${encodeURIComponent(state.chart)}/trace`, {
      method: "POST", body: await file.text(),
    });
    setTrace(trace.records);
  } catch (error) {
    setTrace([]);
    traceError(error.message);
  }
}

// -- the poll -----------------------------------------------------------------------------

async function tick() {
  try {
    drawOverview(await api("/api/overview"));
    $("error").hidden = true;
    await refreshSpot();
  } catch (error) {
    showError(error.message);
  } finally {
    setTimeout(tick, state.refresh);
  }
}

async function start() {
  $("spot-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const id = $("spot-id").value.trim();
    state.spotId = id === "" ? null : id;
    $("relocate-result").textContent = "";
    if (state.spotId === null) {
      $("spot-record").hidden = true;
      $("relocate-form").hidden = true;
    }
    refreshSpot();
  });
  $("relocate-form").addEventListener("submit", relocate);
  $("chart").addEventListener("change", () => loadChart($("chart").value));
  $("trace-file").addEventListener("change", loadTraceFile);
  $("prev").addEventListener("click", () => { stop(); state.step -= 1; drawStep(); });
  $("next").addEventListener("click", () => { stop(); state.step += 1; drawStep(); });
  $("play").addEventListener("click", play);
  let config;
  try {
    config = await api("/api/config");
    const charts = await api("/api/charts");
    $("chart").replaceChildren(...charts.charts.map((c) => {
      const option = document.createElement("option");
      option.value = c.name;
      option.textContent = `${c.chart} (${c.states} states)`;
      option.title = c.summary;
      return option;
    }));
    const first = config.traceCharts[0] || charts.charts[0].name;
    $("chart").value = first;
    loadChart(first);
  } catch (error) {
    showError(error.message);
    config = { refresh: 1, store: "?", mesh: null, relocate: false };
  }
  state.refresh = Math.round(config.refresh * 1000);
  state.relocate = config.relocate;
  $("store-url").textContent = config.store;
  $("mesh-filter").textContent = config.mesh === null ? "" : `mesh ${config.mesh}`;
  tick();
}

document.addEventListener("DOMContentLoaded", start);
