// The live page: renders /state.json (sweep/live_state.py) into the tables and three uPlot charts, every 2 s.
"use strict";
const $ = (id) => document.getElementById(id);
const fmt = (v, d = 0) => (v === null || v === undefined ? "" : Number(v).toFixed(d));
// distinct colours for up to 30 configurations: golden-angle hues, two lightness levels
const colour = (i) => `hsl(${(210 + i * 137.508) % 360}, 70%, ${i % 2 ? 32 : 48}%)`;
const SLA_COLOUR = "#111"; // black, as in the report's plots: no configuration is drawn in it
let charts = {}, lastCurves = "";

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function fill(tableId, rows, make) {
  const body = document.querySelector(`#${tableId} tbody`);
  body.replaceChildren(...rows.map((r) => { const tr = document.createElement("tr"); make(r, tr); return tr; }));
}

function duration(s) {
  if (s === null || s === undefined) return "–";
  s = Math.round(s);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return `${h}:${String(m).padStart(2, "0")}:${String(sec).padStart(2, "0")}`;
}

// a curve's x values: its windows' loads (concurrency, or the offered rate in an open-loop rate ladder)
const loads = (c) => (c.load && c.load.length ? c.load : c.concurrency);

function chart(id, title, key, bound, unit, curves) {
  const xs = [...new Set(curves.flatMap(loads))].sort((a, b) => a - b);
  const byRate = curves.some((c) => c.unit === "req/s");
  const data = [xs];
  const series = [{ label: byRate ? "offered rate" : "concurrency" }];
  curves.forEach((c, i) => {
    data.push(xs.map((x) => { const j = loads(c).indexOf(x); return j < 0 ? null : c[key][j]; }));
    series.push({ label: `${c.phase} ${c.config}`, stroke: colour(i), width: 2, points: { show: true, size: 6 },
                  dash: c.phase === "screen" ? [5, 3] : undefined, spanGaps: true });
  });
  if (bound !== null) {
    data.push(xs.map(() => bound));
    series.push({ label: `SLA ${fmt(bound)} ${unit}`, stroke: SLA_COLOUR, dash: [6, 4], width: 1.5,
                  points: { show: false } });
  }
  if (charts[id]) charts[id].destroy();
  const el = $(id);
  el.replaceChildren();
  if (!xs.length) { el.textContent = `${title}: no window yet`; return; }
  // one legend under the charts serves all three (#legend): uPlot's own, one per chart, would list every
  // configuration three times and push the tables off the screen
  // a latency a hundredfold past the knee flattens every passing step onto zero: log axis, as in the report
  const ys = data.slice(1).flat().filter((v) => v > 0);
  const wide = bound !== null && ys.length && Math.max(...ys) > 20 * Math.min(...ys);
  charts[id] = new uPlot({ title, width: 420, height: 280, series, legend: { show: false },
                           scales: { x: { time: false, distr: 3, log: 2 }, y: wide ? { distr: 3 } : {} },
                           axes: [{ label: byRate ? "offered rate (req/s)" : "client concurrency" },
                                  { label: unit, size: 60 }] }, data, el);
}

function legend(curves, sla) {
  const items = curves.map((c, i) => {
    const li = document.createElement("li");
    li.dataset.config = `${c.phase} ${c.config}`;
    const mark = document.createElement("span");
    mark.className = c.phase === "screen" ? "swatch screen" : "swatch";
    mark.style.borderColor = colour(i);
    li.append(mark, `${c.phase} ${c.config}`);
    if (c.binding) {  // why the knee is where it is (sweep.analysis.binding)
      const why = document.createElement("small");
      why.className = "binding";
      why.textContent = ` — ${c.binding}`;
      li.append(why);
    }
    return li;
  });
  if (curves.length) {
    const li = document.createElement("li");
    li.className = "sla";
    const mark = document.createElement("span");
    mark.className = "swatch screen";
    mark.style.borderColor = SLA_COLOUR;
    li.append(mark, `SLA bound: TTFT p${sla.ttft_percentile} ${fmt(sla.ttft_ms)} ms, ` +
                    `TPOT p${sla.tpot_percentile} ${fmt(sla.tpot_ms)} ms`);
    items.push(li);
  }
  $("legend").replaceChildren(...items);
}

function render(s) {
  $("study").textContent = s.study;
  $("sim").textContent = s.simulated ? "SIMULATED" : "";
  $("sim").className = s.simulated ? "sim" : "";
  $("status").textContent = `(${s.status})`;
  for (const k of ["done", "planned", "running", "queued", "failed"]) $(`n-${k}`).textContent = s[k];
  $("phase").textContent = s.phase;
  $("screened").textContent = s.screened ? `, after ${s.screened} screened` : "";
  $("n-windows").textContent = s.windows_done;
  // an interrupted or failed study is not done: its ETA is none, and the header says why
  $("eta").textContent = s.status === "running" ? duration(s.eta_s) : s.status === "completed" ? "done" : "–";
  const w = s.winner;
  $("winner").className = w ? "" : "muted";
  $("winner").textContent = w
    ? `${w.config} (${w.phase}) at ${w.at || `concurrency ${w.concurrency}`}: goodput ${fmt(w.goodput_tps)} output tok/s` +
      (w.ci_low === null ? "" : `, 95% CI ${fmt(w.ci_low)}–${fmt(w.ci_high)} output tok/s`) + ` — ${w.reason}`
    : (s.no_winner ? `${s.no_winner}${s.status === "running" ? " (yet)" : ""}` : "no configuration has passed the SLA yet");
  $("h-ttft").textContent = `TTFT p${s.sla.ttft_percentile} ms`;
  $("h-tpot").textContent = `TPOT p${s.sla.tpot_percentile} ms`;
  fill("workers", s.workers, (r, tr) => {
    tr.dataset.worker = r.worker;
    tr.append(cell(r.worker, "l"), cell(r.host || "", "l"), cell(r.gpus || "", "l"),
              cell(r.status, r.status === "lost" ? "l fail" : "l"), cell(r.now, "l"), cell(r.windows_done),
              cell(r.configs_done));
  });
  fill("failures", s.failures, (r, tr) => tr.append(cell(r.config, "l"), cell(r.what, "l"), cell(r.worker, "l"),
                                                    cell(r.reason, "l")));
  $("no-failures").hidden = s.failures.length > 0;  // an empty table says so, not only its headers
  fill("windows", [...s.windows].reverse(), (r, tr) => {
    tr.dataset.runId = r.run_id;
    tr.append(cell(r.run_id), cell(r.phase, "l"), cell(r.config, "l"), cell(r.load || r.concurrency), cell(r.worker, "l"),
              cell(r.host || "", "l"), cell(r.gpu || "", "l"),
              cell(fmt(r.goodput_tps)), cell(fmt(r.ttft_ms, 1)), cell(fmt(r.tpot_ms, 1)),
              cell(r.passes_sla ? "pass" : "fail", r.passes_sla ? "pass" : "fail"));
  });
  const key = JSON.stringify(s.curves);
  if (key !== lastCurves && typeof uPlot !== "undefined") {
    lastCurves = key;
    chart("chart-goodput", "goodput", "goodput_tps", null, "output tok/s", s.curves);
    chart("chart-ttft", `TTFT p${s.sla.ttft_percentile}`, "ttft_ms", s.sla.ttft_ms, "ms", s.curves);
    chart("chart-tpot", `TPOT p${s.sla.tpot_percentile}`, "tpot_ms", s.sla.tpot_ms, "ms", s.curves);
    legend(s.curves, s.sla);
  }
  $("updated").textContent = new Date().toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

render(JSON.parse($("state").textContent));
setInterval(async () => {
  try {
    const r = await fetch("state.json" + location.search, { cache: "no-store" });
    if (r.ok) render(await r.json());
  } catch (e) { $("updated").textContent = `(the server did not answer: ${e})`; }
}, 2000);
