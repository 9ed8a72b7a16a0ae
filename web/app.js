// faultline dashboard: the live pages under /ui/ (jobs, job, fleet, agents), read-only over the
// aggregator's HTTP API (docs/api.md, docs/dashboard.md). The job page is FaultlineView
// (job_view.js), the same code as the offline report. Everything from the store is inserted as
// text, never as markup.
(function () {
  "use strict";
  var V = window.FaultlineView;
  var el = V.el, svg = V.svg, append = V.append, clear = V.clear;
  var PAGE_SIZE = 50;
  var POLL_MS = 5000;
  var SUB_DOMAINS = ["hardware", "network", "system_software", "infrastructure", "application", "ambiguous",
    "unattributed", "none"];
  var STATES = ["fail", "timeout", "node_fail", "out_of_memory", "cancelled", "preempted", "success", "running"];
  var main = document.getElementById("page");
  var pollTimer = null;

  function ready(on) { document.body.dataset.ready = on ? "1" : "0"; }
  function note(text) { document.getElementById("refresh-note").textContent = text || ""; }
  function params() { return new URLSearchParams(location.search); }
  function enc(s) { return encodeURIComponent(s); }
  function jobHref(id) { return "/ui/jobs/" + enc(id); }

  function getJson(url) {
    return fetch(url, {headers: {Accept: "application/json"}}).then(function (r) {
      return r.text().then(function (text) {
        var body = null;
        try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
        if (!r.ok) {
          var err = new Error((body && body.error) || ("HTTP " + r.status));
          err.status = r.status;
          throw err;
        }
        return {body: body, headers: r.headers, text: text};
      });
    });
  }

  function showError(where, err) {
    append(where, el("div", {class: "error-box", id: "error"}, "Could not load: " + (err && err.message || err)));
    ready(true);
  }

  function ago(iso) {
    var t = Date.parse(iso || "");
    if (isNaN(t)) return "never";
    var s = Math.max(0, Math.round((Date.now() - t) / 1000));
    if (s < 90) return s + " s ago";
    if (s < 5400) return Math.round(s / 60) + " min ago";
    if (s < 172800) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " d ago";
  }

  function schedule(fn) {
    if (pollTimer) clearTimeout(pollTimer);
    pollTimer = setTimeout(fn, POLL_MS);
  }

  // ---- jobs ----

  function input(id, label, value, placeholder) {
    return el("label", null, label, el("input", {type: "text", id: id, value: value || "", placeholder: placeholder || ""}));
  }
  function select(id, label, options, value) {
    var s = el("select", {id: id});
    append(s, el("option", {value: ""}, "any"));
    options.forEach(function (o) { append(s, el("option", {value: o, selected: o === value}, o)); });
    return el("label", null, label, s);
  }

  function jobsPage() {
    main.dataset.page = "jobs";
    var p = params();
    var offset = parseInt(p.get("offset") || "0", 10) || 0;
    var lastText = null;
    var form = el("div", {class: "filters card"},
      input("f-since", "since", p.get("since"), "e.g. 7d, 24h"),
      select("f-state", "terminal state", STATES, p.get("state") || ""),
      select("f-sub-domain", "sub_domain", SUB_DOMAINS, p.get("sub_domain") || ""),
      input("f-node", "responsible node", p.get("blamed"), "gpu-b17"),
      input("f-rule", "cause rule", p.get("rule"), "xid.79"),
      input("f-q", "search", p.get("q"), "job id, node, rule, summary"),
      el("label", {class: "check"}, el("input", {type: "checkbox", id: "f-all", checked: p.get("all") === "1"}),
        "all jobs (not only failed)"));
    var total = el("span", {id: "jobs-total"}, "");
    var t = V.table("jobs", ["job", "terminal state", "sub_domain", "responsible node", "device", "cause",
      "revision", "status", "end (UTC)"]);
    var prev = el("button", {id: "prev", type: "button"}, "‹ newer");
    var next = el("button", {id: "next", type: "button"}, "older ›");
    var range = el("span", {class: "muted"});
    clear(main);
    append(main, form, el("div", {class: "card"},
      el("div", {class: "pager"}, el("b", null, "Jobs: "), total, range),
      el("div", {class: "scroll"}, t.table),
      el("div", {class: "pager"}, prev, next)));

    function val(id) { return document.getElementById(id).value.trim(); }
    function query() {
      var q = new URLSearchParams();
      var all = document.getElementById("f-all").checked;
      var state = val("f-state");
      if (val("f-since")) q.set("since", val("f-since"));
      if (state) q.set("state", state);
      else if (!all) q.set("state", "failed");
      ["sub_domain:f-sub-domain", "blamed:f-node", "rule:f-rule", "q:f-q"].forEach(function (kv) {
        var k = kv.split(":");
        if (val(k[1])) q.set(k[0], val(k[1]));
      });
      return q;
    }
    function syncUrl() {
      var q = query();
      if (document.getElementById("f-all").checked) q.set("all", "1");
      if (q.get("state") === "failed") q.delete("state");
      if (offset) q.set("offset", String(offset));
      var s = q.toString();
      history.replaceState(null, "", "/ui/" + (s ? "?" + s : ""));
    }

    function row(j) {
      var v = j.verdict || {};
      var resp = v.responsible || [];
      var nodes = (v.responsible_nodes || resp.map(function (r) { return r.node; }));
      var devices = resp.filter(function (r) { return r.device; }).map(function (r) { return r.device; });
      var link = el("a", {href: jobHref(j.job_id)}, j.job_id);
      return el("tr", {"data-job-id": j.job_id},
        el("td", {class: "mono"}, link),
        el("td", {"data-col": "state"}, j.terminal_state || (j.state || "").toLowerCase()),
        el("td", {"data-col": "sub_domain"}, v.sub_domain ? V.badge(v.sub_domain) : ""),
        el("td", {"data-col": "node", title: v.systemic ? "systemic: no single node" : null},
          nodes.join(", ") || (v.systemic ? "" : "")),
        el("td", {"data-col": "device", class: "small mono"}, devices.join(", ") || (v.systemic ? "systemic" : "")),
        el("td", {"data-col": "cause", class: "mono", title: v.summary || null}, v.cause || ""),
        el("td", {"data-col": "revision", class: "num"}, v.revision ? String(v.revision) : ""),
        el("td", {"data-col": "status"}, v.status || ""),
        el("td", {"data-col": "end", class: "nowrap small"}, V.fmtTime(j.end || j.start)));
    }

    function load(silent) {
      var q = query();
      q.set("limit", String(PAGE_SIZE));
      q.set("offset", String(offset));
      q.set("total", "1");
      if (!silent) ready(false);
      return getJson("/jobs?" + q.toString()).then(function (res) {
        var n = parseInt(res.headers.get("X-Total-Count") || "0", 10);
        if (silent && res.text === lastText) return schedulePoll(res.body);
        ready(false);
        lastText = res.text;
        clear(t.body);
        res.body.forEach(function (j) { append(t.body, row(j)); });
        total.textContent = String(n);
        range.textContent = n ? "  showing " + (offset + 1) + "–" + (offset + res.body.length) : "  no jobs match";
        prev.disabled = offset <= 0;
        next.disabled = offset + PAGE_SIZE >= n;
        ready(true);
        schedulePoll(res.body);
      }).catch(function (e) { showError(main, e); });
    }
    function schedulePoll(rows) {
      var live = rows.some(function (j) { return j.verdict && j.verdict.status === "provisional"; });
      note(live ? "live: provisional verdicts shown, refreshing every 5 s" : "");
      if (live) schedule(function () { load(true); });
      else if (pollTimer) clearTimeout(pollTimer);
    }

    var debounce = null;
    function changed() {
      offset = 0;
      syncUrl();
      if (debounce) clearTimeout(debounce);
      debounce = setTimeout(function () { load(false); }, 250);
    }
    ["f-since", "f-node", "f-rule", "f-q"].forEach(function (id) {
      document.getElementById(id).addEventListener("input", changed);
    });
    ["f-state", "f-sub-domain", "f-all"].forEach(function (id) {
      document.getElementById(id).addEventListener("change", changed);
    });
    prev.addEventListener("click", function () { offset = Math.max(0, offset - PAGE_SIZE); syncUrl(); load(false); });
    next.addEventListener("click", function () { offset += PAGE_SIZE; syncUrl(); load(false); });
    load(false);
  }

  // ---- job ----

  function jobPage(id) {
    main.dataset.page = "job";
    document.title = "faultline: job " + id;
    var lastRevision = null;
    function load() {
      ready(false);
      var base = "/jobs/" + enc(id);
      return Promise.all([getJson(base), getJson(base + "/diagnosis").catch(function (e) { return {error: e}; })])
        .then(function (r) {
          var job = r[0].body, d = r[1].body;
          if (!d) {
            clear(main);
            append(main, el("section", {class: "card", id: "verdict"},
              el("h1", null, "Job ", id), el("p", null, "No verdict yet: ", (r[1].error && r[1].error.message) || ""),
              el("span", {"data-field": "status"}, job.terminal_state ? "pending" : "running")));
            ready(true);
            schedule(load);
            return;
          }
          lastRevision = d.verdict ? d.verdict.revision : null;
          V.render(main, d, {job: job, jsonHref: base + "/diagnosis"});
          document.title = "faultline: job " + id + " — " + (d.sub_domain || "");
          ready(true);
          if (d.verdict && d.verdict.status === "provisional") {
            note("live: provisional verdict, refreshing every 5 s");
            schedule(poll);
          } else note("");
        }).catch(function (e) { clear(main); showError(main, e); });
    }
    function poll() {
      getJson("/jobs/" + enc(id)).then(function (r) {
        var v = r.body.verdict;
        if (v && (v.revision !== lastRevision || v.status !== "provisional")) load();
        else schedule(poll);
      }).catch(function () { schedule(poll); });
    }
    load();
  }

  // ---- fleet ----

  var SD_COLOURS = {hardware: "#c0392b", network: "#1f6fd1", system_software: "#8e44ad", infrastructure: "#d68910",
    application: "#1e8449", ambiguous: "#b7950b", unattributed: "#7f8c8d", none: "#aab2bd"};

  function jobLinks(ids, max) {
    var s = el("span");
    (ids || []).slice(0, max || 6).forEach(function (id, i) {
      if (i) append(s, " ");
      append(s, el("a", {href: jobHref(id), class: "mono small"}, id));
    });
    if ((ids || []).length > (max || 6)) append(s, el("span", {class: "more"}, " +" + (ids.length - (max || 6))));
    return s;
  }

  function heatmap(daily) {
    var box = el("div", {id: "heatmap", class: "scroll"});
    var days = daily.days || [];
    var rows = daily.nodes || [];
    if (!rows.length) { append(box, el("p", {class: "muted"}, "No failed job blamed a node in this window.")); return box; }
    var max = 1;
    rows.forEach(function (r) { r.days.forEach(function (c) { max = Math.max(max, c); }); });
    var t = el("table", {class: "heat"});
    var hr = el("tr", null, el("th"));
    days.forEach(function (d, i) {
      append(hr, el("th", {title: d}, i % 7 === 0 || days.length <= 14 ? d.slice(5) : ""));
    });
    append(t, el("thead", null, hr));
    var body = el("tbody");
    rows.forEach(function (r) {
      var tr = el("tr", {"data-node": r.node}, el("th", {class: "node"}, r.node));
      r.days.forEach(function (c, i) {
        var a = c ? 0.25 + 0.75 * c / max : 0;
        var td = el("td", {title: r.node + " " + days[i] + ": " + c + " failed job(s)", "data-count": String(c)},
          c ? String(c) : "");
        // CSSOM, not a style attribute: the page's CSP allows no inline styles.
        td.style.background = c ? "rgba(192,57,43," + a.toFixed(2) + ")" : "#eef0f3";
        append(tr, td);
      });
      append(body, tr);
    });
    append(t, body);
    append(box, t);
    return box;
  }

  function breakdown(daily) {
    var days = daily.days || [];
    var series = daily.sub_domains || [];
    var w = Math.max(300, days.length * 22 + 60), h = 200, left = 34, bottom = 30;
    var s = svg("svg", {id: "breakdown", class: "bars", width: w, height: h, viewBox: "0 0 " + w + " " + h});
    var totals = days.map(function (_, i) {
      return series.reduce(function (acc, x) { return acc + x.days[i]; }, 0);
    });
    var max = Math.max.apply(null, [1].concat(totals));
    var bw = Math.max(4, (w - left - 10) / Math.max(1, days.length) - 4);
    append(s, svg("text", {x: 2, y: 12}, String(max)));
    append(s, svg("text", {x: 2, y: h - bottom}, "0"));
    days.forEach(function (d, i) {
      var x = left + i * (bw + 4), y = h - bottom;
      series.forEach(function (x0) {
        var c = x0.days[i];
        if (!c) return;
        var bh = c / max * (h - bottom - 16);
        y -= bh;
        append(s, svg("rect", {x: x, y: y, width: bw, height: bh, fill: SD_COLOURS[x0.sub_domain] || "#999",
          "data-sd": x0.sub_domain}, svg("title", null, d + " " + x0.sub_domain + ": " + c)));
      });
      if (i % Math.ceil(days.length / 10) === 0) append(s, svg("text", {x: x, y: h - bottom + 14}, d.slice(5)));
    });
    var legend = el("div", {class: "legend"});
    series.forEach(function (x0) { append(legend, V.badge(x0.sub_domain)); });
    return el("div", null, legend, s);
  }

  function fleetPage() {
    main.dataset.page = "fleet";
    var since = params().get("since") || "30d";
    var form = el("div", {class: "filters card"}, input("fleet-since", "window (since)", since, "7d, 30d"),
      el("span", {class: "muted", id: "fleet-summary"}));
    clear(main);
    var body = el("div");
    append(main, form, body);
    function load() {
      ready(false);
      Promise.all([getJson("/nodes?rank=1&since=" + enc(since)), getJson("/fleet/daily?since=" + enc(since))])
        .then(function (r) {
          var rank = r[0].body, daily = r[1].body;
          clear(body);
          document.getElementById("fleet-summary").textContent = rank.jobs + " failed job(s) with a verdict since " +
            V.fmtTime(rank.since) + " UTC; " + rank.systemic_jobs + " systemic";
          var devByNode = {};
          (rank.devices || []).forEach(function (d) { (devByNode[d.node] = devByNode[d.node] || []).push(d); });
          var off = V.table("offenders", ["#", "node", "failed jobs", "score", "sub_domains", "devices", "jobs (evidence)",
            "last"]);
          (rank.nodes || []).forEach(function (n, i) {
            var devs = el("span", {class: "small mono"});
            (devByNode[n.node] || []).forEach(function (d, k) {
              if (k) append(devs, ", ");
              append(devs, d.device + " (" + d.jobs + ")");
            });
            append(off.body, el("tr", {"data-node": n.node},
              el("td", {class: "num"}, String(i + 1)), el("td", {class: "mono"}, n.node),
              el("td", {class: "num"}, String(n.jobs)), el("td", {class: "num"}, n.score.toFixed(1)),
              el("td", null, (n.sub_domains || []).map(V.badge)), el("td", null, devs),
              el("td", null, jobLinks(n.job_ids)), el("td", {class: "nowrap small"}, V.fmtTime(n.last_job_end))));
          });
          var dev = V.table("devices", ["#", "node", "device", "failed jobs", "sub_domains", "jobs (evidence)"]);
          (rank.devices || []).forEach(function (d, i) {
            append(dev.body, el("tr", {"data-node": d.node, "data-device": d.device},
              el("td", {class: "num"}, String(i + 1)), el("td", {class: "mono"}, d.node),
              el("td", {class: "mono small"}, d.device), el("td", {class: "num"}, String(d.jobs)),
              el("td", null, (d.sub_domains || []).map(V.badge)), el("td", null, jobLinks(d.job_ids))));
          });
          var pat = V.table("patterns", ["cause rule", "node", "device", "detail", "jobs"]);
          (rank.patterns || []).forEach(function (p) {
            append(pat.body, el("tr", {"data-rule": p.rule_id, "data-node": p.node},
              el("td", {class: "mono"}, p.rule_id), el("td", {class: "mono"}, p.node),
              el("td", {class: "mono small"}, p.device), el("td", {class: "small mono"}, p.detail),
              el("td", null, jobLinks(p.job_ids, 10))));
          });
          var none = function (list, what) {
            return list && list.length ? null : el("p", {class: "muted"}, what);
          };
          append(body,
            el("section", {class: "card"}, el("h2", null, "Repeat offenders: nodes"),
              none(rank.nodes, "No node was blamed in this window."),
              el("div", {class: "scroll"}, off.table)),
            el("div", {class: "two"},
              el("section", {class: "card"}, el("h2", null, "Devices (GPU, HCA port)"), el("div", {class: "scroll short"}, dev.table)),
              el("section", {class: "card"}, el("h2", null, "Recurring patterns (same cause in 2+ jobs)"),
                none(rank.patterns, "No cause repeated in this window."), el("div", {class: "scroll short"}, pat.table))),
            el("section", {class: "card"}, el("h2", null, "Failures by node × day (UTC)"), heatmap(daily)),
            el("section", {class: "card"}, el("h2", null, "Failed jobs by sub_domain per day"), breakdown(daily)));
          ready(true);
        }).catch(function (e) { clear(body); showError(body, e); });
    }
    var debounce = null;
    document.getElementById("fleet-since").addEventListener("input", function (ev) {
      since = ev.target.value.trim() || "30d";
      history.replaceState(null, "", "/ui/fleet?since=" + enc(since));
      if (debounce) clearTimeout(debounce);
      debounce = setTimeout(load, 300);
    });
    load();
  }

  // ---- agents ----

  function agentsPage() {
    main.dataset.page = "agents";
    var recent = params().get("since") || "24h";  // nodes of jobs in this window without a live agent
    clear(main);
    var body = el("div");
    append(main, body);
    function load() {
      ready(false);
      // Refusals are this aggregator process's own (an older one answers 404: none listed).
      var refusals = getJson("/agents/refusals").catch(function () { return {body: {refusals: []}}; });
      Promise.all([getJson("/agents"), getJson("/nodes"), getJson("/fleet/job-nodes?since=" + enc(recent)), refusals]).then(function (r) {
        var agents = r[0].body, nodes = r[1].body, jobNodes = r[2].body, refused = (r[3].body && r[3].body.refusals) || [];
        var nodeBy = {};
        nodes.forEach(function (n) { nodeBy[n.hostname] = n; });
        var withAgent = {};
        agents.forEach(function (a) { withAgent[a.hostname] = a; });
        var rows = agents.map(function (a) { return {agent: a, node: nodeBy[a.hostname], job: null}; });
        var jobOf = {};
        (jobNodes.nodes || []).forEach(function (j) {
          jobOf[j.node] = j;
          if (!withAgent[j.node]) rows.push({agent: null, node: null, job: j});
        });
        rows.forEach(function (x) { x.live = !!(x.agent && x.agent.live); x.name = x.agent ? x.agent.hostname : x.job.node; });
        rows.sort(function (a, b) { return (a.live - b.live) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0); });
        var t = V.table("agents", ["node", "agent", "last heartbeat", "version", "ruleset", "sources", "lag",
          "spool", "losses", "symptoms", "recent job"]);
        var dead = 0, recentDead = 0;
        rows.forEach(function (x) {
          var a = x.agent, n = x.node, j = jobOf[x.name];
          if (!x.live) { dead++; if (j) recentDead++; }
          var srcs = el("span");
          var lost = 0;
          ((a && a.sources) || []).forEach(function (s) {
            lost += s.lost || 0;
            append(srcs, el("span", {class: "src src-" + s.status, title: s.source + " (" + s.format + "): " + s.status +
              (s.reason ? " — " + s.reason : "") + "; records " + s.records + ", skipped " + s.skipped + ", lost " + s.lost},
              s.source.split("/").pop() + (s.status !== "ok" ? " " + s.status : "")));
          });
          var lag = n && n.reported_until ? ago(n.reported_until).replace(" ago", "") : "";
          append(t.body, el("tr", {"data-node": x.name, "data-live": x.live ? "true" : "false"},
            el("td", {class: "mono"}, x.name),
            el("td", null, a ? el("span", {class: x.live ? "pill-live" : "pill-dead"}, x.live ? "live" : "not live") :
              el("span", {class: "pill-dead"}, "no agent")),
            el("td", {class: "nowrap small", title: a ? V.fmtTime(a.last_heartbeat) : null}, a ? ago(a.last_heartbeat) : ""),
            el("td", {class: "small"}, a ? a.agent_version : ""), el("td", {class: "small mono"}, a ? a.ruleset_version : ""),
            el("td", null, srcs), el("td", {class: "small nowrap"}, lag),
            el("td", {class: "num small"}, a ? a.spool_batches + " / " + a.spool_bytes + " B" : ""),
            el("td", {class: "num" + (a && (a.dropped_symptoms + lost) ? " bad" : "")}, a ? String(a.dropped_symptoms + lost) : ""),
            el("td", {class: "num"}, a ? String(a.symptoms) : ""),
            el("td", null, j ? el("a", {href: jobHref(j.last_job_id), class: "mono small"}, j.last_job_id) : "")));
        });
        clear(body);
        append(body, el("section", {class: "card"},
          el("h2", null, "Agents"),
          el("p", {class: "muted"}, agents.length + " agent(s); " + dead + " node(s) without a live agent, " + recentDead +
            " of them in jobs since " + recent + " (listed first)"),
          el("div", {class: "scroll"}, t.table)));
        if (refused.length) {
          // Why an agent may be missing above: who was refused, from where, and what to check.
          var rt = V.table("refusals", ["last", "peer", "reason", "key or host", "count", "detail", "what to check"]);
          refused.forEach(function (x) {
            append(rt.body, el("tr", {"data-reason": x.reason},
              el("td", {class: "nowrap small", title: "first " + V.fmtTime(x.first)}, ago(x.last)),
              el("td", {class: "mono small"}, x.peer || "unknown"),
              el("td", null, el("span", {class: "pill-dead"}, x.reason)),
              el("td", {class: "mono small"}, x.key ? "key " + x.key : x.host),
              el("td", {class: "num"}, String(x.count)),
              el("td", {class: "small"}, x.detail),
              el("td", {class: "small"}, x.hint)));
          });
          append(body, el("section", {class: "card"},
            el("h2", null, "Refused connections"),
            el("p", {class: "muted"}, "identities the ingest endpoint refused since this aggregator started"),
            el("div", {class: "scroll"}, rt.table)));
        }
        ready(true);
      }).catch(function (e) { clear(body); showError(body, e); });
    }
    load();
  }

  // ---- routing ----

  function route() {
    var path = location.pathname.replace(/\/+$/, "");
    document.querySelectorAll("header nav a").forEach(function (a) { a.classList.remove("active"); });
    var nav = function (n) {
      var a = document.querySelector('header nav a[data-nav="' + n + '"]');
      if (a) a.classList.add("active");
    };
    var m = path.match(/^\/ui\/jobs\/(.+)$/);
    if (m) { nav("jobs"); return jobPage(decodeURIComponent(m[1])); }
    if (path === "/ui/fleet") { nav("fleet"); return fleetPage(); }
    if (path === "/ui/agents") { nav("agents"); return agentsPage(); }
    if (path === "/ui" || path === "/ui/jobs") { nav("jobs"); return jobsPage(); }
    main.dataset.page = "notfound";
    append(main, el("p", null, "No such page: ", path));
    ready(true);
  }
  route();
})();
