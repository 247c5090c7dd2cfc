/* cuzk-tasks status page: live through Server-Sent Events (/api/events), polling fallback.
   Every value is inserted with textContent / setAttribute: nothing from the server is ever
   parsed as HTML. */
(function () {
  "use strict";
  var cfg = JSON.parse(document.getElementById("page-config").textContent);
  var SVGNS = "http://www.w3.org/2000/svg";
  var PART_STATES = ["pending", "synthesizing", "synth_done", "proving", "finalizing", "done", "failed", "cancelled"];
  var clockOffset = 0;   // server time - local time, seconds
  var lastStatus = null;

  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (!Object.prototype.hasOwnProperty.call(attrs, k) || attrs[k] === null || attrs[k] === undefined) continue;
      if (k === "text") el.textContent = String(attrs[k]);
      else if (k === "cls") el.className = attrs[k];
      else el.setAttribute(k, String(attrs[k]));
    }
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined || c === false) continue;
      el.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return el;
  }
  function s(tag, attrs) {
    var el = document.createElementNS(SVGNS, tag);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) el.setAttribute(k, String(attrs[k]));
    for (var i = 2; i < arguments.length; i++) if (arguments[i]) el.appendChild(arguments[i]);
    return el;
  }
  function replace(id, nodes) {
    var el = document.getElementById(id);
    if (!el) return;
    while (el.firstChild) el.removeChild(el.firstChild);
    nodes.forEach(function (n) { el.appendChild(n); });
  }
  function fmtMs(v) {
    if (v === null || v === undefined || v === "") return "–";
    v = Number(v);
    return v < 1000 ? v.toFixed(0) + " ms" : (v / 1000).toFixed(2) + " s";
  }
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function fmtDur(sec) {
    if (sec === null || sec === undefined || sec === "") return "–";
    sec = Math.max(0, Number(sec));
    if (sec < 60) return sec.toFixed(1) + " s";
    if (sec < 3600) return Math.floor(sec / 60) + "m " + pad(Math.floor(sec % 60)) + "s";
    if (sec < 86400) return Math.floor(sec / 3600) + "h " + pad(Math.floor(sec % 3600 / 60)) + "m";
    return Math.floor(sec / 86400) + "d " + pad(Math.floor(sec % 86400 / 3600)) + "h";
  }
  function fmtTime(ts) {
    if (ts === null || ts === undefined || ts === "") return "–";
    var d = new Date(Number(ts) * 1000);
    return pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds());
  }
  var CRC = (function () {
    var t = [];
    for (var n = 0; n < 256; n++) { var c = n; for (var k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320 ^ (c >>> 1) : c >>> 1; t[n] = c >>> 0; }
    return t;
  })();
  function jobHue(id) {  // CRC-32 of the UTF-8 bytes, as cuzk_tasks/web/filters.py job_hue
    var bytes = unescape(encodeURIComponent(String(id || ""))), c = 0xFFFFFFFF;
    for (var i = 0; i < bytes.length; i++) c = CRC[(c ^ bytes.charCodeAt(i)) & 0xFF] ^ (c >>> 8);
    return ((c ^ 0xFFFFFFFF) >>> 0) % 360;
  }
  function jobLink(id) {
    return h("a", {href: cfg.job_url.replace("JOBID", encodeURIComponent(id)), text: id});
  }
  function serverNow() { return Date.now() / 1000 + clockOffset; }

  function deviceCard(w) {
    var body;
    if (w.state === "proving") {
      body = h("dl", {cls: "kv"},
        h("dt", {text: "job"}), h("dd", {cls: "mono wrap"}, jobLink(w.job)),
        h("dt", {text: "partition"}), h("dd", {text: "#" + w.partition}),
        h("dt", {text: "kind"}), h("dd", {cls: "wrap", text: w.kind}),
        h("dt", {text: "busy"}), h("dd", {cls: "busy", "data-since": w.since, text: fmtDur(w.busy_s)}));
    } else {
      body = h("dl", {cls: "kv"}, h("dt", {text: "job"}),
        h("dd", {cls: "muted", text: w.state === "offline" ? "no heartbeat" : "idle"}));
    }
    var meta = h("dl", {cls: "kv small"});
    if (w.gpu) {
      var g = w.gpu, dd = h("dd");
      if (g.mem_total_mb) { dd.appendChild(h("progress", {max: g.mem_total_mb, value: g.mem_used_mb || 0})); dd.appendChild(document.createTextNode(" ")); }
      dd.appendChild(document.createTextNode((g.mem_used_mb === null ? "–" : g.mem_used_mb) + " / " +
        (g.mem_total_mb === null ? "–" : g.mem_total_mb) + " MiB" + (g.util_pct === null ? "" : " · " + g.util_pct + "% util")));
      meta.appendChild(h("dt", {text: "memory"})); meta.appendChild(dd);
    }
    meta.appendChild(h("dt", {text: "heartbeat"})); meta.appendChild(h("dd", {text: fmtDur(w.heartbeat_age_s) + " ago"}));
    var queued = h("dd", {text: w.outstanding + " routed" + (w.awaiting_synthesis ? " · " + w.awaiting_synthesis + " waiting for synthesis" : "")});
    if (w.no_cpu_worker) {  // host-affine stages: no partitions without a CPU worker on the host
      queued.appendChild(document.createTextNode(" · "));
      queued.appendChild(h("span", {cls: "warn", text: "no CPU worker on " + w.host + ": gets no partitions"}));
    }
    meta.appendChild(h("dt", {text: "queued"})); meta.appendChild(queued);
    if (w.circuits) {
      meta.appendChild(h("dt", {text: "serves"})); meta.appendChild(h("dd", {cls: "wrap", text: w.circuits.join(", ") || "–"}));
    }
    meta.appendChild(h("dt", {text: "resident"})); meta.appendChild(h("dd", {cls: "wrap", text: (w.resident || []).join(", ") || "–"}));
    var sub = (w.host || "") + " · device " + (w.device === null || w.device === undefined ? "–" : w.device) + (w.backend ? " · " + w.backend + " backend" : "") + (w.gpu_name ? " · " + w.gpu_name : "");
    return h("article", {cls: "card st-" + w.state, "data-worker": w.id},
      h("header", null, h("span", {cls: "wid mono wrap", text: w.id}), h("span", {cls: "badge st-" + w.state, text: w.state})),
      h("div", {cls: "sub", text: sub}), body, meta);
  }

  function partitions(st, j) {  // schema 2: each partition is an array in st.partition_fields order
    var f = st.partition_fields;
    return j.partitions.map(function (row) {
      var p = {};
      for (var i = 0; i < f.length; i++) p[f[i]] = row[i];
      return p;
    });
  }

  function partCell(p) {
    return h("span", {cls: "cell ps-" + p.state, "data-idx": p.idx, "data-state": p.state,
      title: "#" + p.idx + " " + p.state + " · synth " + fmtMs(p.synth_ms) + " · prove " + fmtMs(p.prove_ms) +
        " · finalize " + fmtMs(p.finalize_ms) + (p.worker ? " · " + p.worker : "")});
  }

  function timelineRows(tl) {
    var nodes = [], t0 = tl.from, span = tl.window_s, to = tl.to;
    tl.devices.forEach(function (dev) {
      var label = h("div", {cls: "tl-label mono wrap"}, dev.worker);
      if (dev.duty_cycle !== null && dev.duty_cycle !== undefined)
        label.appendChild(h("span", {cls: "muted small", text: " " + Math.round(dev.duty_cycle * 100) + "% busy"}));
      var svg = s("svg", {"class": "tl-row", viewBox: "0 0 1000 24", preserveAspectRatio: "none", role: "img",
        "aria-label": "timeline of " + dev.worker}, s("rect", {"class": "tl-bg", x: 0, y: 0, width: 1000, height: 24}));
      dev.bars.forEach(function (b) {
        var end = b.end === null ? to : b.end;
        var x = b.start > t0 ? (b.start - t0) / span * 1000 : 0;
        var w = Math.max((end - t0) / span * 1000 - x, 1.5);
        var title = s("title", {});
        title.textContent = b.job + " #" + b.idx + " · " + fmtDur(end - b.start);
        svg.appendChild(s("rect", {"class": "tl-bar" + (b.end === null ? " running" : ""), x: x.toFixed(2), y: 3,
          width: w.toFixed(2), height: 18, fill: "hsl(" + jobHue(b.job) + " 65% 55%)"}, title));
      });
      nodes.push(label, svg);
    });
    return nodes;
  }

  function row(cells) { var tr = h("tr"); cells.forEach(function (c) { tr.appendChild(c); }); return tr; }
  function td(text, cls) { return h("td", {cls: cls || null, text: text}); }
  function emptyRow(n, text) { return row([h("td", {colspan: n, cls: "muted", text: text})]); }

  function render(st) {
    lastStatus = st;
    clockOffset = st.generated_at - Date.now() / 1000;
    document.getElementById("updated").textContent = fmtTime(st.generated_at);
    document.getElementById("uptime").textContent = fmtDur(st.uptime_s);
    var devices = st.workers.filter(function (w) { return w.role === "device"; });
    var cpus = st.workers.filter(function (w) { return w.role !== "device"; });
    document.getElementById("dev-count").textContent = devices.length;
    replace("devices", devices.length ? devices.map(deviceCard) : [h("p", {cls: "muted", text: "no device workers registered"})]);
    replace("timeline", timelineRows(st.timeline));
    var ticks = [];
    for (var k = 5; k > 0; k--) {
      var t = st.timeline.window_s * k / 5;
      ticks.push(h("span", {text: "−" + (t >= 120 && t % 60 === 0 ? (t / 60) + "m" : Math.round(t) + "s")}));
    }
    ticks.push(h("span", {text: "now"}));
    replace("tl-axis", ticks);
    document.getElementById("tl-window").textContent = (st.timeline.window_s / 60).toFixed(1);
    replace("queues", st.queues.map(function (q) {
      return row([td(q.name, "mono wrap"), td(String(q.depth), "num")]);
    }));
    var kinds = {};
    Object.keys(st.counters.completed).concat(Object.keys(st.counters.failed)).forEach(function (k) { kinds[k] = 1; });
    var counterRows = Object.keys(kinds).sort().map(function (k) {
      return row([td(k, "wrap"), td(String(st.counters.completed[k] || 0), "num"), td(String(st.counters.failed[k] || 0), "num")]);
    });
    var ctb = document.querySelector("#counters tbody");
    while (ctb.firstChild) ctb.removeChild(ctb.firstChild);
    counterRows.forEach(function (r) { ctb.appendChild(r); });
    replace("throughput", st.throughput.map(function (t) {
      return h("div", null, h("span", {cls: "big", text: t.per_min.toFixed(1)}),
        h("span", {cls: "muted small", text: "/min · last " + Math.round(t.window_s / 60) + "m (" + t.completed + ")"}));
    }));
    var c = st.throughput_series.counts, mx = Math.max.apply(null, c.concat([1])), pts = [];
    for (var i = 0; i < c.length; i++) pts.push((i * 300 / Math.max(c.length - 1, 1)).toFixed(1) + "," + (38 - c[i] / mx * 36).toFixed(1));
    replace("spark", [s("polyline", {"vector-effect": "non-scaling-stroke", points: pts.join(" ")})]);
    document.getElementById("job-count").textContent = st.jobs.length;
    replace("jobs", st.jobs.length ? st.jobs.map(function (j) {
      var strip = h("div", {cls: "strip"});
      partitions(st, j).forEach(function (p) { strip.appendChild(partCell(p)); });
      var tr = row([h("td", {cls: "mono wrap"}, jobLink(j.id)), td(j.kind, "wrap"), td(j.curve ? j.circuit + " · " + j.curve : j.circuit, "wrap"), td(String(j.priority)),
        td(fmtTime(j.submitted_at)), h("td", null, h("span", {cls: "badge js-" + j.state, text: j.state}),
          j.deadline_at ? h("span", {cls: "muted small deadline", text: " " + fmtDur(j.deadline_at - st.generated_at) + " left"}) : null),
        h("td", null, h("div", {cls: "prog", text: (j.n_done || 0) + "/" + j.n_partitions}), strip)]);
      tr.setAttribute("data-job", j.id);
      return tr;
    }) : [emptyRow(7, "no jobs in flight")]);
    replace("failures", st.failures.length ? st.failures.map(function (f) {
      return row([td(fmtTime(f.at)), h("td", {cls: "mono wrap"}, jobLink(f.job)), td(String(f.idx)), td(f.kind, "wrap"),
        td(f.worker || "–", "mono wrap"), td(f.error, "error pre")]);
    }) : [emptyRow(6, "none")]);
    replace("recent", st.recent_jobs.length ? st.recent_jobs.map(function (j) {
      return row([h("td", {cls: "mono wrap"}, jobLink(j.id)), td(j.kind, "wrap"),
        h("td", null, h("span", {cls: "badge js-" + j.state, text: j.state})), td((j.n_done || 0) + "/" + j.n_partitions), td(fmtTime(j.finished_at))]);
    }) : [emptyRow(5, "none")]);
    replace("cpus", cpus.length ? cpus.map(function (w) {
      var off = w.state === "offline";
      return row([td(w.id, "mono wrap"), h("td", null, h("span", {cls: "badge st-" + (off ? "offline" : "idle"), text: off ? "offline" : "online"})),
        td(w.holding.stages + " stage · " + w.holding.requests + " request"),
        td(fmtDur(w.heartbeat_age_s) + " ago")]);
    }) : [emptyRow(4, "none")]);
  }

  function tick() {  // busy timers count up between updates
    var now = serverNow();
    var els = document.querySelectorAll(".busy[data-since]");
    for (var i = 0; i < els.length; i++) {
      var since = Number(els[i].getAttribute("data-since"));
      if (since) els[i].textContent = fmtDur(now - since);
    }
  }

  var conn = document.getElementById("conn");
  function setConn(kind, text) { conn.className = "conn conn-" + kind; conn.textContent = text; }

  var pollTimer = null, source = null, lastMessage = 0, retryMs = 10000;
  function poll() {
    fetch(cfg.status_url, {credentials: "same-origin", cache: "no-cache"})  // revalidated: 304 when unchanged
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (st) { render(st); if (!source || source.readyState !== 1) setConn("polling", "polling"); })
      .catch(function () { setConn("down", "disconnected"); });
  }
  function startPolling() {
    if (pollTimer) return;
    poll();
    pollTimer = setInterval(poll, cfg.poll_ms);
  }
  function stopPolling() { if (pollTimer) { clearInterval(pollTimer); pollTimer = null; } }

  function connect() {
    if (!window.EventSource) { startPolling(); return; }
    source = new EventSource(cfg.events_url);
    source.addEventListener("status", function (ev) {
      lastMessage = Date.now();
      retryMs = 10000;
      stopPolling();
      setConn("live", "live");
      render(JSON.parse(ev.data));
    });
    source.addEventListener("transition", function () { lastMessage = Date.now(); });
    source.onerror = function () {
      if (source.readyState === 2) {  // closed for good (HTTP error, e.g. 429 over the
        // server's cap on live streams): poll, and retry the stream later, less and less often
        setConn("polling", "polling");
        startPolling();
        setTimeout(connect, retryMs);
        retryMs = Math.min(retryMs * 2, 300000);
      } else {
        setConn("polling", "reconnecting");
      }
    };
  }
  setInterval(function () {  // a silent stream (proxy buffering?) falls back to polling
    if (source && Date.now() - lastMessage > 20000) startPolling();
    tick();
  }, 1000);

  try { render(JSON.parse(document.getElementById("initial-status").textContent)); } catch (e) { /* keep server render */ }
  lastMessage = Date.now();
  connect();
})();
