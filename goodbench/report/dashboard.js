// goodbench history dashboard: filters, trend plots (inline SVG) with change points, links to each run.
// Everything from the runs is inserted as text (textContent, attribute values), never as markup.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("gb-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const FILTERS = ["workload", "model", "server", "gpu", "label"];
  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, text, ns) {
    const e = ns ? document.createElementNS(SVG, tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function state() {
    const s = { metric: DATA.metrics[0].name };
    for (const part of location.hash.replace(/^#/, "").split("&")) {
      const i = part.indexOf("=");
      if (i > 0) s[decodeURIComponent(part.slice(0, i))] = decodeURIComponent(part.slice(i + 1));
    }
    return s;
  }

  function setState(s) {
    const parts = [];
    for (const k of ["metric", ...FILTERS]) if (s[k]) parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(s[k]));
    history.replaceState(null, "", "#" + parts.join("&"));
    render();
  }

  function fmt(v, unit) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    if (unit === "fraction") return (v * 100).toFixed(1) + "%";
    const a = Math.abs(v);
    return a >= 1000 ? Math.round(v).toLocaleString("en") : a >= 1 ? v.toPrecision(3) : v.toFixed(3);
  }

  function labelsOf(r) {
    return Object.keys(r.labels).sort().map((k) => k + "=" + r.labels[k]);
  }

  function identityMatches(key, s) {
    const id = DATA.identities[key];
    return ["workload", "model", "server", "gpu"].every((f) => !s[f] || id[f] === s[f]);
  }

  function runMatches(r, s) {
    return identityMatches(r.identity, s) && (!s.label || labelsOf(r).includes(s.label));
  }

  function options(select, values, current) {
    select.textContent = "";
    select.appendChild(el("option", { value: "" }, "all"));
    for (const v of values) {
      const o = el("option", { value: v }, v);
      if (v === current) o.selected = true;
      select.appendChild(o);
    }
  }

  function buildFilters(s) {
    const ids = Object.values(DATA.identities);
    for (const f of ["workload", "model", "server", "gpu"]) {
      options($("f-" + f), [...new Set(ids.map((i) => i[f]).filter((v) => v))].sort(), s[f]);
    }
    options($("f-label"), [...new Set(DATA.runs.flatMap(labelsOf))].sort(), s.label);
    const m = $("f-metric");
    m.textContent = "";
    for (const x of DATA.metrics) {
      const o = el("option", { value: x.name }, x.name + " (" + x.unit + ")");
      if (x.name === s.metric) o.selected = true;
      m.appendChild(o);
    }
  }

  function plot(key, idx, metric, s) {
    const W = 760, H = 210, L = 64, R = 16, T = 14, B = 34;
    const runs = idx.map((i) => DATA.runs[i]);
    const vals = runs.map((r) => r.m[metric.name]);
    let lo = Math.min(...vals), hi = Math.max(...vals);
    if (hi === lo) { lo -= Math.abs(lo) * 0.05 || 1; hi += Math.abs(hi) * 0.05 || 1; }
    const pad = (hi - lo) * 0.08;
    lo -= pad; hi += pad;
    const x = (i) => L + (runs.length === 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (runs.length - 1));
    const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
    const svg = el("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "trend", "data-identity": key }, null, true);
    svg.appendChild(el("rect", { x: L, y: T, width: W - L - R, height: H - T - B, class: "frame" }, null, true));
    for (const v of [hi - pad, lo + pad]) {
      svg.appendChild(el("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, fmt(v, metric.unit), true));
    }
    svg.appendChild(el("text", { x: L, y: H - 10, class: "tick" }, runs[0].started.slice(0, 10), true));
    svg.appendChild(el("text", { x: W - R, y: H - 10, "text-anchor": "end", class: "tick" }, runs[runs.length - 1].started.slice(0, 10), true));
    svg.appendChild(el("polyline", { points: vals.map((v, i) => x(i) + "," + y(v)).join(" "), class: "line" }, null, true));
    runs.forEach((r, i) => {  // where the server's version changed: a faint line and the new version
      if (i === 0 || !r.server_version || r.server_version === runs[i - 1].server_version) return;
      const vx = (x(i - 1) + x(i)) / 2;
      svg.appendChild(el("line", { x1: vx, x2: vx, y1: T, y2: H - B, class: "ver" }, null, true));
      svg.appendChild(el("text", { x: vx + 3, y: H - B - 4, class: "verl" }, r.server_version, true));
    });
    const changes = ((DATA.changes[metric.name] || {})[key]) || [];
    for (const c of changes) {
      const pos = idx.indexOf(c.run);
      if (pos < 0) continue;
      const cx = pos > 0 ? (x(pos - 1) + x(pos)) / 2 : x(pos);
      svg.appendChild(el("line", { x1: cx, x2: cx, y1: T, y2: H - B, class: "cp " + c.direction, "data-run": DATA.runs[c.run].run_id }, null, true));
      const t = el("text", { x: cx + 4, y: T + 12, class: "cpl " + c.direction }, (c.change * 100).toFixed(1) + "% p=" + c.p.toFixed(3), true);
      svg.appendChild(t);
    }
    runs.forEach((r, i) => {
      const a = el("a", { href: r.href, class: "pt" + (runMatches(r, s) ? "" : " dim") }, null, true);
      const dot = el("circle", { cx: x(i), cy: y(vals[i]), r: 3.5 }, null, true);
      dot.appendChild(el("title", {}, `${r.run_id} · ${r.started} · ${fmt(vals[i], metric.unit)}` + (r.server_version ? ` · ${r.server_version}` : ""), true));
      a.appendChild(dot);
      svg.appendChild(a);
    });
    return [svg, changes.length];
  }

  function render() {
    const s = state();
    const metric = DATA.metrics.find((m) => m.name === s.metric) || DATA.metrics[0];
    buildFilters(Object.assign(s, { metric: metric.name }));
    const plots = $("plots");
    plots.textContent = "";
    let nplots = 0, nchanges = 0;
    const series = DATA.series[metric.name] || {};
    for (const key of Object.keys(series)) {
      const idx = series[key];
      if (!identityMatches(key, s) || !idx.some((i) => runMatches(DATA.runs[i], s))) continue;
      const sec = el("section", { class: "plot", "data-identity": key });
      sec.appendChild(el("h3", {}, DATA.identities[key].desc));
      sec.appendChild(el("div", { class: "key" }, "identity " + key + " · " + idx.length + " runs"));
      const [svg, n] = plot(key, idx, metric, s);
      sec.appendChild(svg);
      plots.appendChild(sec);
      nplots += 1;
      nchanges += n;
    }
    if (!nplots) plots.appendChild(el("p", { class: "empty" }, "no series matches these filters"));
    const body = $("runs");
    body.textContent = "";
    const shown = DATA.runs.filter((r) => runMatches(r, s)).reverse();
    for (const r of shown.slice(0, 500)) {
      const tr = el("tr", { class: "run" });
      const id = DATA.identities[r.identity];
      const cells = [r.started.slice(0, 19).replace("T", " "), null, id.workload, id.model,
        [id.server, r.server_version].filter((v) => v).join(" "), id.gpu, fmt(r.m[metric.name], metric.unit), labelsOf(r).join(", ")];
      cells.forEach((c, i) => {
        const td = el("td", i === 6 ? { class: "num" } : {});
        if (c === null) td.appendChild(el("a", { href: r.href, class: "runlink" }, r.run_id + (r.report ? "" : " (summary)")));
        else td.textContent = c;
        tr.appendChild(td);
      });
      body.appendChild(tr);
    }
    $("count").textContent = `${shown.length} runs · ${nplots} series · ${nchanges} change point${nchanges === 1 ? "" : "s"} · ${metric.name} (${metric.better} is better)`;
  }

  document.addEventListener("change", (e) => {
    if (!e.target.id || !e.target.id.startsWith("f-")) return;
    const s = state();
    s[e.target.id.slice(2)] = e.target.value;
    setState(s);
  });
  window.addEventListener("hashchange", render);
  render();
})();
