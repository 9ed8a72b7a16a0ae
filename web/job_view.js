// faultline dashboard: the job view, shared by the live page (/ui/jobs/ID, app.js) and the
// offline report (`faultline attribute --html`, report.js). Renders one diagnosis document
// (docs/output-schema.md) into a container. Every string that comes from logs or rules (evidence,
// host names, rule text, summaries) goes in as text (textContent / createTextNode), never as
// markup. No dependencies; works from file:// with no network.
(function (global) {
  "use strict";

  // The SVG namespace name (an identifier, never fetched), spelled so that the offline report holds
  // no text that looks like a URL.
  var SVG = ["http:", "", "www.w3.org", "2000", "svg"].join("/");
  var ROLES = ["root", "cascade", "teardown", "context"];

  // el("td", {class: "x", "data-col": "state"}, "text", childNode, ...): attributes and text only.
  function el(tag, attrs) {
    var e = document.createElement(tag);
    setAttrs(e, attrs);
    for (var i = 2; i < arguments.length; i++) appendOne(e, arguments[i]);
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    setAttrs(e, attrs);
    for (var i = 2; i < arguments.length; i++) appendOne(e, arguments[i]);
    return e;
  }
  function setAttrs(e, attrs) {
    if (!attrs) return;
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) return;
      e.setAttribute(k, v === true ? "" : String(v));
    });
  }
  // append(parent, child, ...): nodes, arrays of them, or strings (as text nodes).
  function append(parent) {
    for (var i = 1; i < arguments.length; i++) appendOne(parent, arguments[i]);
    return parent;
  }
  function appendOne(parent, c) {
    if (c === null || c === undefined || c === false) return;
    if (Array.isArray(c)) c.forEach(function (x) { appendOne(parent, x); });
    else if (typeof c === "object" && c.nodeType) parent.appendChild(c);
    else parent.appendChild(document.createTextNode(String(c)));
  }
  function clear(e) {
    while (e.firstChild) e.removeChild(e.firstChild);
    return e;
  }

  function timeMs(s) {
    if (!s) return null;
    var t = Date.parse(s);
    return isNaN(t) ? null : t;
  }
  // "2024-06-03 05:41:17.402" (UTC).
  function fmtTime(s) {
    if (!s) return "";
    return String(s).replace("T", " ").replace(/Z$/, "");
  }
  function fmtAxis(ms, step) {
    var iso = new Date(ms).toISOString();
    if (step >= 86400000) return iso.slice(5, 10);
    if (step >= 60000) return iso.slice(11, 16);
    if (step >= 1000) return iso.slice(11, 19);
    return iso.slice(14, 23);
  }

  function badge(subDomain) {
    var sd = subDomain || "none";
    return el("span", {class: "sd sd-" + sd, "data-sd": sd}, sd);
  }
  function roleBadge(role) {
    return el("span", {class: "role role-" + role}, role);
  }
  function nodesOf(entry) {
    if (entry.nodes && entry.nodes.length) return entry.nodes;
    return entry.node ? [entry.node] : [];
  }
  // "gpu-b01, gpu-b02 +61" with every name in the title.
  function nodeList(nodes, max) {
    max = max || 3;
    var shown = nodes.slice(0, max).join(", ");
    var s = el("span", {title: nodes.join(", ")}, shown);
    if (nodes.length > max) append(s, el("span", {class: "more"}, " +" + (nodes.length - max)));
    return s;
  }
  function section(id, title) {
    var s = el("section", {class: "card", id: id ? id + "-section" : null});
    append(s, el("h2", null, title));
    return s;
  }

  // ---- verdict card ----

  function statusOf(d) {
    if (d.verdict && d.verdict.status) return d.verdict.status;
    return "final";  // an offline bundle: every log it holds was read
  }

  function statusWhy(d) {
    var v = d.verdict;
    if (!v) return "offline diagnosis of a collected bundle: every log in it was read";
    var why = {
      job_end: "made when the job ended",
      settle: "the settle time after the job's end passed",
      late_symptoms: "symptoms arrived after the previous revision",
      late_templates: "error lines no rule matched arrived after the previous revision",
      late_coverage: "a node's log began to count after the previous revision",
      metrics: "metric evidence changed the verdict",
      job_output: "the job's output file was uploaded",
      job_update: "the scheduler updated the job",
      reported: "every node has reported past the job's end",
      timeout: "nodes did not report in time; judged with what arrived"
    }[v.reason] || v.reason || "";
    if (v.status === "provisional") {
      var missing = v.missing_nodes || [];
      return "provisional (" + why + ")" + (missing.length ? "; still waiting for " + missing.length +
        " node(s) to report: " + missing.slice(0, 8).join(", ") + (missing.length > 8 ? " ..." : "") : "");
    }
    return why;
  }

  function field(name, label, value) {
    return el("div", {class: "kv"}, el("span", {class: "k"}, label), el("span", {class: "v", "data-field": name}, value));
  }

  function renderVerdict(d) {
    var card = el("section", {class: "card verdict", id: "verdict", "data-sd": d.sub_domain || "none"});
    var cause = d.cause || null;
    var resp = d.responsible_nodes || [];
    var status = statusOf(d);
    var head = el("div", {class: "verdict-head"},
      el("span", {class: "sd sd-" + (d.sub_domain || "none"), "data-field": "sub_domain"}, d.sub_domain || "none"),
      el("h1", null, "Job ", d.job_id || "?"),
      el("span", {class: "status status-" + status, "data-field": "status"}, status));
    append(card, head);
    var grid = el("div", {class: "kvs"});
    append(grid, field("terminal_state", "terminal state", d.terminal_state || ""));
    append(grid, field("responsible", "responsible", resp.map(function (r) { return r.node; }).join(", ")));
    if (d.systemic) append(grid, el("div", {class: "kv"}, el("span", {class: "k"}, "systemic"),
      el("span", {class: "v"}, "more suspect nodes than the threshold: no single node is blamed")));
    if (resp.length) {
      var devs = el("span", {class: "v"});
      resp.forEach(function (r, i) {
        if (i) append(devs, "; ");
        append(devs, el("b", null, r.node), r.device ? " " + r.device : "",
          " (" + (r.confidence_band || "") + ", confidence " + Math.round((r.confidence || 0) * 100) + "%" +
          (r.advice && r.advice !== "none" ? ": " + r.advice : "") + ")");
      });
      append(grid, el("div", {class: "kv"}, el("span", {class: "k"}, "where"), devs));
    }
    if (d.confidence_band) append(grid, field("confidence_band", "confidence",
      d.confidence_band + " (" + Math.round((d.confidence || 0) * 100) + "%): " +
      ({strong: "act on it", likely: "inspect before acting", lead: "a place to look, not a verdict"}[d.confidence_band] || "")));
    append(grid, field("cause", "cause rule", cause ? cause.rule_id : ""));
    if (d.divergent_node) append(grid, field("divergent_node", "lead node",
      d.divergent_node.node + " (" + (d.divergent_node.confidence_band || "lead") + ", " +
      Math.round((d.divergent_node.confidence || 0) * 100) + "%): " + (d.divergent_node.why || "")));
    if (cause) {
      append(grid, el("div", {class: "kv"}, el("span", {class: "k"}, "what"),
        el("span", {class: "v"}, cause.summary || cause.symptom || "",
          cause.time ? el("span", {class: "muted"}, "  at " + fmtTime(cause.time) + " UTC") : "")));
    }
    append(grid, el("div", {class: "kv"}, el("span", {class: "k"}, "why final/provisional"),
      el("span", {class: "v", id: "status-why"}, statusWhy(d))));
    append(card, grid);
    if (cause && cause.evidence) append(card, el("div", {class: "evidence-block"},
      el("div", {class: "k"}, "evidence"), el("pre", {class: "evidence"}, cause.evidence)));
    if (d.recommended_action) append(card, el("div", {class: "action"},
      el("div", {class: "k"}, "recommended action"), el("p", null, d.recommended_action)));
    if (d.explanation) append(card, el("div", {class: "explanation"},
      el("div", {class: "k"}, "explanation"), el("p", null, d.explanation)));
    return card;
  }

  // ---- timeline ----

  // Lanes: one per node; nodes with the same set of (rule, role) entries collapse into one lane.
  function buildLanes(chain) {
    var perNode = {};
    var order = [];
    chain.forEach(function (e, idx) {
      nodesOf(e).forEach(function (n) {
        if (!perNode[n]) { perNode[n] = []; order.push(n); }
        perNode[n].push(idx);
      });
    });
    var groups = {};
    var lanes = [];
    order.forEach(function (n) {
      var key = perNode[n].join(",");
      if (groups[key]) { groups[key].nodes.push(n); return; }
      var lane = {key: key, nodes: [n], entries: perNode[n]};
      groups[key] = lane;
      lanes.push(lane);
    });
    lanes.forEach(function (l) {
      l.nodes.sort();
      l.hasRoot = l.entries.some(function (i) { return chain[i].role === "root"; });
      var ts = l.entries.map(function (i) { return timeMs(chain[i].first || chain[i].time); })
        .filter(function (t) { return t !== null; });
      l.first = ts.length ? Math.min.apply(null, ts) : Infinity;
    });
    lanes.sort(function (a, b) {
      if (a.hasRoot !== b.hasRoot) return a.hasRoot ? -1 : 1;
      if (a.first !== b.first) return a.first - b.first;
      return a.nodes[0] < b.nodes[0] ? -1 : 1;
    });
    return lanes;
  }

  function niceStep(span) {
    var steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000,
      300000, 600000, 900000, 1800000, 3600000, 7200000, 21600000, 43200000, 86400000];
    for (var i = 0; i < steps.length; i++) if (span / steps[i] <= 8) return steps[i];
    return 86400000 * Math.ceil(span / 86400000 / 8);
  }

  function tooltip(e, node) {
    var lines = [e.rule_id + " (" + e.role + ", " + (e.sub_domain || "") + ")", "node: " + node];
    if (e.first || e.time) lines.push("first: " + fmtTime(e.first || e.time) + " UTC");
    if (e.last && e.last !== e.first) lines.push("last: " + fmtTime(e.last) + " UTC");
    if (!(e.first || e.time)) lines.push("time: unknown (untimed)");
    if (e.count > 1) lines.push("count: " + e.count);
    if (e.summary) lines.push(e.summary);
    if (e.evidence) lines.push("evidence: " + e.evidence);
    if (e.because) lines.push("because: " + e.because);
    return lines.join("\n");
  }

  function marker(e, x, y, node, timed, extra) {
    var g = svg("g", {class: "marker m-" + e.role, "data-role": e.role, "data-rule": e.rule_id,
      "data-t": timed ? String(timeMs(e.first || e.time)) : null, "data-node": node});
    var r = e.role === "root" ? 7 : 5;
    if (extra) append(g, extra);
    if (e.role === "root") append(g, svg("path", {d: "M" + x + " " + (y - r - 2) + " L" + (x + r + 2) + " " + y + " L" + x +
      " " + (y + r + 2) + " L" + (x - r - 2) + " " + y + " Z", class: "shape"}));
    else if (e.role === "teardown") append(g, svg("rect", {x: x - r, y: y - r, width: 2 * r, height: 2 * r, class: "shape"}));
    else if (e.role === "context") append(g, svg("path", {d: "M" + x + " " + (y - r - 1) + " L" + (x + r + 1) + " " + (y + r) +
      " L" + (x - r - 1) + " " + (y + r) + " Z", class: "shape"}));
    else append(g, svg("circle", {cx: x, cy: y, r: r, class: "shape"}));
    append(g, svg("title", null, tooltip(e, node)));
    return g;
  }

  function renderTimeline(d) {
    var chain = d.chain || [];
    var sec = section("timeline", "Timeline (UTC)");
    if (!chain.length) {
      append(sec, el("p", {class: "muted"}, "No symptoms in the chain."));
      append(sec, svg("svg", {id: "timeline", width: 10, height: 10, class: "empty"}));
      return sec;
    }
    var lanes = buildLanes(chain);
    var timed = chain.filter(function (e) { return timeMs(e.first || e.time) !== null; });
    var hasUntimed = timed.length < chain.length;
    // The axis spans the incident (every timed entry but context); context far before or after
    // it (a reboot hours earlier) is pinned to the edge, its real time in its label and title.
    var t0 = Infinity, t1 = -Infinity;
    var spanOf = timed.filter(function (e) { return e.role !== "context"; });
    (spanOf.length ? spanOf : timed).forEach(function (e) {
      var a = timeMs(e.first || e.time), b = timeMs(e.last) || a;
      t0 = Math.min(t0, a); t1 = Math.max(t1, b, a);
    });
    if (!timed.length) { t0 = 0; t1 = 1000; }
    if (t1 - t0 < 2000) { t0 -= 1000; t1 += 1000; }
    var pad = (t1 - t0) * 0.04;
    t0 -= pad; t1 += pad;

    var mostUntimed = 0;
    lanes.forEach(function (l) {
      var n = l.entries.filter(function (i) { return timeMs(chain[i].first || chain[i].time) === null; }).length;
      mostUntimed = Math.max(mostUntimed, n);
    });
    var labelW = 250, plotW = 820, untimedW = hasUntimed ? Math.max(90, mostUntimed * 18 + 30) : 0, laneH = 30, top = 34;
    var width = labelW + plotW + untimedW + 20;
    var height = top + lanes.length * laneH + 12;
    var x = function (t) { return labelW + (t - t0) / (t1 - t0) * plotW; };
    var root = svg("svg", {id: "timeline", width: width, height: height,
      viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "cross-node timeline"});

    // axis
    var axis = svg("g", {class: "axis"});
    var step = niceStep(t1 - t0);
    for (var t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      append(axis, svg("line", {x1: x(t), x2: x(t), y1: top - 6, y2: height - 8, class: "tick"}));
      append(axis, svg("text", {x: x(t), y: top - 10, "text-anchor": "middle"}, fmtAxis(t, step)));
    }
    append(axis, svg("text", {x: 4, y: top - 10, class: "axis-title"},
      timed.length ? new Date(t0 + pad).toISOString().slice(0, 10) + " UTC" : "no timed symptoms"));
    if (hasUntimed) {
      append(axis, svg("rect", {x: labelW + plotW + 8, y: top - 4, width: untimedW - 8, height: height - top - 4,
        class: "untimed-strip"}));
      append(axis, svg("text", {x: labelW + plotW + 8 + (untimedW - 8) / 2, y: top - 10, "text-anchor": "middle",
        class: "axis-title"}, "untimed"));
    }
    append(root, axis);

    // the root's moment across all lanes
    var rootEntry = chain.filter(function (e) { return e.role === "root" && timeMs(e.first || e.time) !== null; })[0];
    if (rootEntry) {
      var rx = x(timeMs(rootEntry.first || rootEntry.time));
      append(root, svg("line", {x1: rx, x2: rx, y1: top - 4, y2: height - 8, class: "root-line"}));
    }

    lanes.forEach(function (lane, li) {
      var y0 = top + li * laneH, cy = y0 + laneH / 2;
      var collapsed = lane.nodes.length - 1;
      var g = svg("g", {class: "lane" + (lane.hasRoot ? " lane-root" : ""), "data-lane": lane.nodes[0],
        "data-collapsed": collapsed > 0 ? String(collapsed) : null,
        "data-nodes": collapsed > 0 ? lane.nodes.join(",") : null});
      append(g, svg("rect", {x: 0, y: y0 + 1, width: width, height: laneH - 2, class: "lane-bg" + (li % 2 ? " odd" : "")}));
      var label = svg("text", {x: 6, y: cy + 4, class: "lane-label"}, lane.nodes[0]);
      if (collapsed > 0) append(label, svg("tspan", {class: "collapsed"}, " +" + collapsed + " nodes with the same symptoms"));
      append(label, svg("title", null, lane.nodes.join(", ")));
      append(g, label);
      var untimedIdx = 0;
      lane.entries.forEach(function (i) {
        var e = chain[i];
        var a = timeMs(e.first || e.time);
        if (a === null) {
          var ux = labelW + plotW + 24 + (untimedIdx++) * 18;
          append(g, marker(e, ux, cy, lane.nodes[0], false));
          return;
        }
        var b = timeMs(e.last) || a;
        if (a < t0 || a > t1) {  // outside the incident's span: at the edge
          var early = a < t0, ex = early ? labelW - 4 : labelW + plotW + 4;
          var tag = svg("text", {x: early ? ex + 10 : ex - 10, y: cy - 8, class: "edge-label",
            "text-anchor": early ? "start" : "end"}, (early ? "← " : "") + fmtAxis(a, 1000) + (early ? "" : " →"));
          append(g, marker(e, ex + (early ? 8 : -8), cy, lane.nodes[0], true, tag));
          return;
        }
        var bar = b > a ? svg("line", {x1: x(a), x2: x(Math.min(b, t1)), y1: cy, y2: cy, class: "span s-" + e.role}) : null;
        append(g, marker(e, x(a), cy, lane.nodes[0], true, bar));
      });
      append(root, g);
    });

    var legend = el("div", {class: "legend"});
    ROLES.forEach(function (r) { append(legend, el("span", {class: "lg lg-" + r}, r)); });
    append(legend, el("span", {class: "muted"}, "  hover a marker for its evidence line and why it has its role"));
    append(sec, legend);
    append(sec, el("div", {class: "timeline-wrap"}, root));
    return sec;
  }

  // ---- tables ----

  function table(id, headers) {
    var t = el("table", {id: id, class: "grid"});
    var tr = el("tr");
    headers.forEach(function (h) { append(tr, el("th", null, h)); });
    append(t, el("thead", null, tr));
    var body = el("tbody");
    append(t, body);
    return {table: t, body: body};
  }

  function renderChain(d) {
    var sec = section("chain", "Chain");
    var t = table("chain", ["time (UTC)", "role", "symptom", "count", "nodes", "rule", "because", "evidence"]);
    (d.chain || []).forEach(function (e) {
      append(t.body, el("tr", {"data-rule": e.rule_id, "data-role": e.role, class: "r-" + e.role},
        el("td", {class: "nowrap"}, e.first || e.time ? fmtTime(e.first || e.time) : "untimed"),
        el("td", null, roleBadge(e.role)),
        el("td", null, e.symptom || "", e.summary ? el("div", {class: "muted small"}, e.summary) : null),
        el("td", {class: "num"}, String(e.count || 1)),
        el("td", {class: "nowrap"}, nodeList(nodesOf(e), 2)),
        el("td", {class: "mono"}, e.rule_id),
        el("td", {class: "small"}, e.because || ""),
        el("td", null, e.evidence ? el("code", {class: "evidence"}, e.evidence) : "")));
    });
    append(sec, el("div", {class: "scroll"}, t.table));
    return sec;
  }

  // Error lines no rule matched that are unusual for the job (issue 30), most unusual first.
  function renderUnrecognized(d) {
    var lines = d.unrecognized || [];
    var sec = section("unrecognized", "Unrecognized error lines" + (lines.length ? " (" + lines.length + ")" : ""));
    if (!lines.length) {
      append(sec, el("p", {class: "muted"}, "None listed: no unusual error line was left unmatched by the rules" +
        (d.verdict ? " (the live aggregator lists none until agents ship templates)." : ".")));
      return sec;
    }
    var t = table("unrecognized-table", ["first (UTC)", "count", "nodes", "first line", "why unusual", "template"]);
    lines.forEach(function (u) {
      append(t.body, el("tr", {"data-nodes": (u.nodes || []).join(",")},
        el("td", {class: "nowrap"}, u.first_time ? fmtTime(u.first_time) : "untimed"),
        el("td", {class: "num"}, String(u.count || 1)),
        el("td", {class: "nowrap"}, nodeList(u.nodes || [], 3)),
        el("td", null, el("code", {class: "evidence"}, u.first_line || "")),
        el("td", {class: "small"}, (u.why || []).join("; ")),
        el("td", {class: "mono small"}, u.template || "")));
    });
    append(sec, el("div", {class: "scroll"}, t.table));
    return sec;
  }

  function isGap(c) {
    return c.status === "missing" || c.status === "partial" || c.status === "error" || (c.skipped || 0) > 0;
  }

  function renderCoverage(d) {
    var cov = (d.coverage || []).slice();
    var gaps = cov.filter(isGap).length;
    var sec = section("coverage", "Coverage" + (gaps ? " (" + gaps + " gap" + (gaps > 1 ? "s" : "") + ")" : ""));
    if (d.verdict && d.verdict.missing_nodes && d.verdict.missing_nodes.length)
      append(sec, el("p", {class: "warn"}, "Nodes that have not reported past the job's end: ",
        nodeList(d.verdict.missing_nodes, 10)));
    var t = table("coverage", ["node", "source", "format", "records", "skipped", "status", "reason", "clock"]);
    cov.sort(function (a, b) { return isGap(b) - isGap(a); });
    cov.forEach(function (c) {
      append(t.body, el("tr", {"data-status": c.status || "ok", class: isGap(c) ? "gap" : null},
        el("td", null, c.node || ""),
        el("td", {class: "mono small"}, c.source || ""),
        el("td", null, c.format || ""),
        el("td", {class: "num"}, String(c.records || 0)),
        el("td", {class: "num" + ((c.skipped || 0) > 0 ? " bad" : "")}, String(c.skipped || 0)),
        el("td", null, el("span", {class: "st st-" + (c.status || "ok")}, c.status || "ok")),
        el("td", {class: "small"}, c.reason || ""),
        el("td", {class: "small"}, c.clock || "")));
    });
    append(sec, el("div", {class: "scroll short"}, t.table));
    return sec;
  }

  function renderCandidates(d) {
    var sec = section(null, "Candidates (independent causes that compete)");
    sec.id = "candidates";
    var t = table("candidates-table", ["sub_domain", "rule", "node", "device", "time (UTC)", "summary", "evidence"]);
    (d.candidates || []).forEach(function (c) {
      append(t.body, el("tr", {"data-rule": c.rule_id, "data-node": c.node || ""},
        el("td", null, badge(c.sub_domain)), el("td", {class: "mono"}, c.rule_id || ""),
        el("td", null, c.node || ""), el("td", null, c.device || ""), el("td", {class: "nowrap"}, fmtTime(c.time)),
        el("td", null, c.summary || ""), el("td", null, c.evidence ? el("code", {class: "evidence"}, c.evidence) : "")));
    });
    append(sec, t.table);
    return sec;
  }

  function changes(prev, r) {
    if (!prev) return "first verdict";
    var out = [];
    if (prev.sub_domain !== r.sub_domain) out.push("sub_domain " + prev.sub_domain + " → " + r.sub_domain);
    if ((prev.cause || "") !== (r.cause || "")) out.push("cause " + (prev.cause || "none") + " → " + (r.cause || "none"));
    var pn = (prev.responsible_nodes || []).join(","), rn = (r.responsible_nodes || []).join(",");
    if (pn !== rn) out.push("responsible " + (pn || "none") + " → " + (rn || "none"));
    if (prev.status !== r.status) out.push(prev.status + " → " + r.status);
    if (prev.symptoms !== r.symptoms) out.push("symptoms " + prev.symptoms + " → " + r.symptoms);
    return out.length ? out.join("; ") : "no change in the verdict";
  }

  // `job` (GET /jobs/{id}) carries the revisions; offline there is one diagnosis and no history.
  function renderRevisions(d, job) {
    var sec = section("revisions", "Revision history");
    var box = el("div", {id: "revisions"});
    var revs = job && job.revisions ? job.revisions : [];
    if (!revs.length) {
      append(box, el("p", {class: "muted"}, d.verdict ? "revision " + d.verdict.revision :
        "Offline diagnosis: a single verdict computed from the bundle (no revisions)."));
    } else {
      var t = table("revisions-table", ["rev", "created (UTC)", "status", "reason", "sub_domain", "cause",
        "responsible", "what changed"]);
      revs.forEach(function (r, i) {
        append(t.body, el("tr", {"data-revision": String(r.revision), "data-status": r.status},
          el("td", {class: "num"}, String(r.revision)), el("td", {class: "nowrap"}, fmtTime(r.created)),
          el("td", null, el("span", {class: "status status-" + r.status}, r.status)), el("td", null, r.reason || ""),
          el("td", null, badge(r.sub_domain)), el("td", {class: "mono"}, r.cause || ""),
          el("td", null, nodeList(r.responsible_nodes || [])), el("td", {class: "small"}, changes(revs[i - 1], r))));
      });
      append(box, t.table);
    }
    append(sec, box);
    return sec;
  }

  function renderMeta(d, job, opts) {
    var p = el("div", {class: "meta"});
    if (job) {
      append(p, el("span", null, "state ", el("b", null, job.state || "")),
        el("span", null, "nodes ", el("b", null, String(job.node_count || (job.nodes || []).length))),
        el("span", null, "start ", el("b", null, fmtTime(job.start))), el("span", null, "end ", el("b", null, fmtTime(job.end))));
    }
    append(p, el("span", null, "ruleset ", el("b", null, d.ruleset_version || "")));
    var a = el("a", {id: "json", href: opts.jsonHref || "#", download: opts.jsonDownload || null}, "diagnosis as JSON");
    append(p, a);
    return p;
  }

  // Renders the whole job page into `container`. opts: {job: GET /jobs/{id} or null,
  // jsonHref: link to the JSON, jsonDownload: file name when the link is a blob}.
  function render(container, d, opts) {
    opts = opts || {};
    clear(container);
    append(container, renderVerdict(d));
    append(container, renderMeta(d, opts.job, opts));
    if (d.sub_domain === "ambiguous" || (d.candidates && d.candidates.length)) append(container, renderCandidates(d));
    append(container, renderTimeline(d));
    append(container, renderChain(d));
    append(container, renderUnrecognized(d));
    append(container, renderCoverage(d));
    append(container, renderRevisions(d, opts.job));
  }

  global.FaultlineView = {
    el: el, svg: svg, append: append, clear: clear, badge: badge, fmtTime: fmtTime, nodeList: nodeList,
    section: section, table: table, render: render, buildLanes: buildLanes
  };
})(window);
