#!/usr/bin/env python3
"""The first-run ledger of real bundles (samples/real/LEDGER.md, issue 26).

Order of work for a new real bundle: gather the thread's lines -> write expected.json from the
thread -> `ledger.py validate BUNDLE` -> `ledger.py first-run BUNDLE` exactly once -> only then
change rules or code for it. `first-run` runs the pinned first-run build (FAULTLINE_FIRST_RUN, a
directory holding `faultline`, `rules/` and `COMMIT`: the code and rules of a commit made before
anything was changed for the bundle) and freezes what it said, with the expected verdict of that
moment, in BUNDLE/first_run.json. It refuses to run a second time.

  ledger.py validate BUNDLE...       bundle structure and expected.json fields, no verdict run
  ledger.py first-run BUNDLE...      the one recorded run (writes BUNDLE/first_run.json)
  ledger.py render                   LEDGER.md from the bundles (stdout)
  ledger.py check                    LEDGER.md is what `render` gives; every bundle has a row
  ledger.py score                    the summary: first-run scores (first/last 50), per domain, spread
  ledger.py pending BINARY           the recorded pending bundles under a build now: which pass (ready
                                     for samples/real); bundles still waiting for their first run are
                                     not run, so nothing is changed for them before it

Bundles live in samples/real/ (their verdict is tested) or samples/real-pending/ (recorded, not yet
right: the fix for their family is still open). Bundles without first_run.json entered before the
ledger ("seen before the ledger")."""
import datetime
import json
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
REAL = os.path.join(ROOT, "samples", "real")
PENDING = os.path.join(ROOT, "samples", "real-pending")
LEDGER = os.path.join(REAL, "LEDGER.md")
SEEN = os.path.join(REAL, "seen-before-ledger.json")
CONCRETE = {"hardware", "network", "system_software", "infrastructure", "application"}
DOMAINS = CONCRETE | {"ambiguous", "unattributed", "none"}


def bundles():
    out = []
    for root, where in ((REAL, "real"), (PENDING, "pending")):
        if not os.path.isdir(root):
            continue
        for n in sorted(os.listdir(root)):
            d = os.path.join(root, n)
            if os.path.isfile(os.path.join(d, "expected.json")):
                out.append((n, d, where))
    return out


def load(path):
    with open(path) as f:
        return json.load(f)


def verdict_of(doc):
    """The fields a verdict is judged on, from a diagnosis (--json) or an expected.json."""
    if "schema_version" in doc:  # a diagnosis
        nodes = sorted(r["node"] if isinstance(r, dict) else r for r in doc["responsible_nodes"])
        cause = doc["cause"]["rule_id"] if doc.get("cause") else None
        device = doc["cause"].get("device", "") if doc.get("cause") else ""
        cands = [c["rule_id"] for c in doc.get("candidates", [])]
    else:  # an expected.json
        nodes = sorted(doc.get("responsible_nodes", []))
        cause = doc.get("cause_rule")
        device = doc.get("device")
        cands = []
    v = {"terminal_state": doc["terminal_state"], "sub_domain": doc["sub_domain"],
         "responsible_nodes": nodes, "cause_rule": cause, "candidates": cands}
    if device is not None:
        v["device"] = device
    return v


def classify(exp, got):
    """exact: state, sub_domain, nodes and cause (and the cause's device when expected.json names
    one) as samples_test checks them. confident-wrong: a
    concrete domain other than the expected one, or a node the thread does not blame. inexact:
    the rest (an honest unattributed/ambiguous, the right domain with another cause or no node)."""
    cause_ok = (exp["cause_rule"] in (None, *got["candidates"]) if got["sub_domain"] == "ambiguous"
                else got["cause_rule"] == exp["cause_rule"] and (not exp.get("device") or got.get("device") == exp["device"]))
    if (got["terminal_state"] == exp["terminal_state"] and got["sub_domain"] == exp["sub_domain"]
            and got["responsible_nodes"] == exp["responsible_nodes"] and cause_ok):
        return "exact"
    wrong_domain = got["sub_domain"] in CONCRETE and got["sub_domain"] != exp["sub_domain"]
    wrong_node = any(n not in exp["responsible_nodes"] for n in got["responsible_nodes"])
    return "confident-wrong" if wrong_domain or wrong_node else "inexact"


def validate(d):
    errs = []
    try:
        exp = load(os.path.join(d, "expected.json"))
    except Exception as e:  # noqa: BLE001 - any parse failure is the message
        return [f"expected.json: {e}"]
    for k in ("terminal_state", "sub_domain", "responsible_nodes", "cause_rule", "source", "quote", "why"):
        if k not in exp:
            errs.append(f"expected.json: no '{k}'")
    if exp.get("sub_domain") not in DOMAINS:
        errs.append(f"expected.json: sub_domain '{exp.get('sub_domain')}' is not one of {sorted(DOMAINS)}")
    if not str(exp.get("source", "")).startswith("https://"):
        errs.append("expected.json: source is not an https:// address")
    if not isinstance(exp.get("responsible_nodes"), list):
        errs.append("expected.json: responsible_nodes is not a list")
    if not os.path.isfile(os.path.join(d, "README.md")):
        errs.append("no README.md (thread, what is verbatim, what was added)")
    job = os.path.join(d, "job.json")
    sacct = os.path.join(d, "sacct.json")
    if not os.path.isfile(job) and not os.path.isfile(sacct):
        errs.append("no job.json or sacct.json")
    elif os.path.isfile(job):
        try:
            j = load(job)
            if "state" not in j:
                errs.append("job.json: no 'state'")
        except Exception as e:  # noqa: BLE001
            errs.append(f"job.json: {e}")
    nodes_dir = os.path.join(d, "nodes")
    logs = [f for f in os.listdir(d) if f not in ("expected.json", "job.json", "sacct.json", "README.md",
                                                     "first_run.json", "nodes")]
    if not logs and not os.path.isdir(nodes_dir):
        errs.append("no logs (job-wide files or nodes/HOST/*)")
    return errs


def first_run(d):
    base = os.environ.get("FAULTLINE_FIRST_RUN", "/work/firstrun/current")
    out = os.path.join(d, "first_run.json")
    if os.path.exists(out):
        sys.exit(f"{d}: first_run.json exists: the first run happens once")
    errs = validate(d)
    if errs:
        sys.exit(f"{d}: not valid, fix before the first run:\n  " + "\n  ".join(errs))
    binary, rules = os.path.join(base, "faultline"), os.path.join(base, "rules")
    commit = open(os.path.join(base, "COMMIT")).read().strip()
    p = subprocess.run([binary, "--rules", rules, "--rules-cache", "off", "attribute", "--json", d],
                       capture_output=True, text=True)
    exp = load(os.path.join(d, "expected.json"))
    rec = {"run_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": commit, "expected": verdict_of(exp)}
    if p.returncode != 0:
        rec["error"] = p.stderr.strip()[:500]
        rec["result"] = "error"
    else:
        got = verdict_of(json.loads(p.stdout))
        rec["got"] = got
        rec["result"] = classify(rec["expected"], got)
    with open(out, "w") as f:
        json.dump(rec, f, indent=2)
        f.write("\n")
    print(f"{os.path.basename(d)}: {rec['result']}  got: {show(rec.get('got'))}  expected: {show(rec['expected'])}")


def show(v):
    if not v:
        return "-"
    nodes = ",".join(v["responsible_nodes"]) if len(v["responsible_nodes"]) <= 2 else \
        f"{v['responsible_nodes'][0]},+{len(v['responsible_nodes']) - 1}"
    return f"{v['terminal_state']} {v['sub_domain']} [{nodes}] {v['cause_rule'] or '-'}"


def revision_note(first_expected, exp_doc):
    """What changed in expected.json after the first run (a proposed rule id given the id of the rule
    written for it, a taxonomy review), shown beside the frozen result: the score keeps the first
    run's comparison with the expected verdict of that moment."""
    now = verdict_of(exp_doc)
    keys = ("terminal_state", "sub_domain", "responsible_nodes", "cause_rule")
    if all(now.get(k) == first_expected.get(k) for k in keys):
        return ""
    why = f" ({exp_doc['revised']})" if exp_doc.get("revised") else ""
    return f"expected revised after the first run: now {show(now)}{why}"


def rows():
    """Ledger rows: the seen-before-ledger bundles first (in their listed order), then every
    first-run bundle in the order of its first run."""
    seen = load(SEEN)
    by_name = {n: (d, w) for n, d, w in bundles()}
    out = []
    for s in seen["bundles"]:
        d, where = by_name.get(s["bundle"], (None, "missing"))
        exp = verdict_of(load(os.path.join(d, "expected.json"))) if d else None
        out.append({"bundle": s["bundle"], "added": s["added"], "where": where, "expected": exp,
                    "source": load(os.path.join(d, "expected.json"))["source"] if d else "",
                    "first": None, "result": "seen", "review": s.get("review", "")})
    recorded = []
    for n, d, where in bundles():
        fr = os.path.join(d, "first_run.json")
        if os.path.isfile(fr):
            r = load(fr)
            exp_doc = load(os.path.join(d, "expected.json"))
            recorded.append({"bundle": n, "added": r["run_at"][:10], "where": where,
                             "expected": r["expected"], "source": exp_doc["source"],
                             "first": r, "result": r["result"], "review": revision_note(r["expected"], exp_doc),
                             "at": r["run_at"]})
    recorded.sort(key=lambda r: (r["at"], r["bundle"]))
    return out + recorded


def scored(rs):
    return [r for r in rs if r["result"] not in ("seen",)]


def score_line(rs):
    n = len(rs)
    if not n:
        return "no rows"
    ex = sum(r["result"] == "exact" for r in rs)
    cw = sum(r["result"] == "confident-wrong" for r in rs)
    return f"{ex} of {n} exact ({100 * ex // n} %), {cw} confident-wrong"


def expand_hosts(expr):
    """A Slurm host list ("gpu-a[01-03,07],gpu-b1") as names; enough of the syntax for job.json."""
    out, depth, cur = [], 0, ""
    parts = []
    for ch in expr:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for part in filter(None, (x.strip() for x in parts)):
        if "[" not in part:
            out.append(part)
            continue
        head, rest = part.split("[", 1)
        body, tail = rest.split("]", 1)
        for r in body.split(","):
            a, _, b = r.partition("-")
            if b and a.isdigit() and b.isdigit():
                out += [f"{head}{str(k).zfill(len(a))}{tail}" for k in range(int(a), int(b) + 1)]
            else:
                out.append(f"{head}{a}{tail}")
    return out


def node_count(name, where):
    """Nodes whose own lines the bundle holds: node folders with a log file, and job hosts named in
    the job-wide logs (a launcher's `host: ` prefix, NCCL's `host:pid:tid`)."""
    d = os.path.join(REAL if where == "real" else PENDING, name)
    hosts = set()
    nd = os.path.join(d, "nodes")
    if os.path.isdir(nd):
        for x in os.listdir(nd):
            if os.path.isdir(os.path.join(nd, x)) and any(f != "node.json" for f in os.listdir(os.path.join(nd, x))):
                hosts.add(x)
    try:
        job = load(os.path.join(d, "job.json"))
    except Exception:  # noqa: BLE001 - sacct.json bundles: node folders only
        return len(hosts)
    names = list(job.get("nodes", [])) + expand_hosts(job.get("nodelist", ""))
    text = ""
    for f in os.listdir(d):
        p = os.path.join(d, f)
        if os.path.isfile(p) and f not in ("expected.json", "job.json", "sacct.json", "README.md", "first_run.json"):
            with open(p, errors="replace") as fh:
                text += fh.read()
    for h in names:
        if h and h not in hosts and (f"{h}:" in text or f"{h} " in text or f"[{h}]" in text):
            hosts.add(h)
    return len(hosts)


def summary(rs):
    s = scored(rs)
    lines = [f"- rows: {len(rs)} ({len(rs) - len(s)} seen before the ledger, {len(s)} with a first run; "
             f"{sum(r['where'] == 'real' for r in rs)} in samples/real, {sum(r['where'] == 'pending' for r in rs)} "
             f"in samples/real-pending)",
             f"- first-run score, all {len(s)}: {score_line(s)}",
             f"- first 50 first runs: {score_line(s[:50])}",
             f"- last 50 first runs: {score_line(s[-50:])}"]
    per = {}
    for r in s[-50:]:
        per.setdefault(r["expected"]["sub_domain"], []).append(r)
    lines.append("- last 50 by expected sub_domain: " + "; ".join(
        f"{k} {sum(r['result'] == 'exact' for r in v)}/{len(v)}"
        + (f" ({sum(r['result'] == 'confident-wrong' for r in v)} cw)" if any(r['result'] == 'confident-wrong' for r in v) else "")
        for k, v in sorted(per.items())))
    spread = {}
    for r in rs:
        e = r["expected"]
        if not e:
            continue
        key = "none (success, cancelled, healthy timeout)" if e["sub_domain"] == "none" else e["sub_domain"]
        spread[key] = spread.get(key, 0) + 1
    multi = sum(node_count(r["bundle"], r["where"]) >= 2 for r in rs)
    lines.append("- spread (all rows, by expected verdict): " + ", ".join(f"{k} {v}" for k, v in sorted(spread.items()))
                 + f"; logs of several nodes: {multi}")
    return lines


def render():
    rs = rows()
    out = ["# First-run ledger of the real bundles",
           "",
           "Generated by `python3 scripts/ledger.py render` from each bundle's `expected.json` and `first_run.json`",
           "(`ledger.py check` in `make test` keeps it current). A bundle's first run is the verdict of the pinned",
           "build of a commit made *before* anything was changed for it; `result` compares it with the verdict the",
           "thread established: exact (state, sub_domain, nodes and cause), inexact (honestly short of it: an",
           "unattributed, the right domain with another cause or no node), confident-wrong (another concrete",
           "domain, or a node the thread does not blame). `now`: `real` = in samples/real, tested; `pending` =",
           "in samples/real-pending, the fix for its family still open. Threads read and not made into a bundle:",
           "`THREADS-READ.md`.",
           "",
           "## Summary",
           ""] + summary(rs) + [
           "",
           "## Rows",
           "",
           "| # | added | bundle | thread | expected | first run | commit | result | now |",
           "|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rs, 1):
        fr = r["first"]
        first = show(fr.get("got")) if fr else "seen before the ledger"
        if fr and fr.get("error"):
            first = "error: " + fr["error"][:60].replace("|", "/")
        commit = fr["commit"][:7] if fr else ""
        res = r["result"] + (f" — {r['review']}" if r["review"] else "")
        out.append(f"| {i} | {r['added']} | {r['bundle']} | {r['source']} | {show(r['expected'])} | {first} | "
                   f"{commit} | {res} | {r['where']} |")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "validate":
        bad = 0
        for d in args:
            errs = validate(d)
            bad += bool(errs)
            print(f"{d}: " + ("ok" if not errs else "\n  " + "\n  ".join(errs)))
        return 1 if bad else 0
    if cmd == "first-run":
        for d in args:
            first_run(d)
        return 0
    if cmd == "render":
        sys.stdout.write(render())
        return 0
    if cmd == "pending":
        ready = 0
        for n, d, where in bundles():
            if where != "pending" or not os.path.isfile(os.path.join(d, "first_run.json")):
                continue
            p = subprocess.run([args[0], "attribute", "--json", d], capture_output=True, text=True)
            if p.returncode != 0:
                print(f"{n:44} ERROR {p.stderr.strip()[:80]}")
                continue
            exp = verdict_of(load(os.path.join(d, "expected.json")))
            got = verdict_of(json.loads(p.stdout))
            ok = classify(exp, got) == "exact"
            ready += ok
            print(f"{n:44} {'PASS' if ok else 'no  '}  got: {show(got)}" + ("" if ok else f"  expected: {show(exp)}"))
        print(f"{ready} ready for samples/real")
        return 0
    if cmd == "score":
        print("\n".join(summary(rows())))
        return 0
    if cmd == "check":
        want = render()
        have = open(LEDGER).read() if os.path.exists(LEDGER) else ""
        names = {n for n, _, _ in bundles()}
        listed = {r["bundle"] for r in rows()}
        missing = sorted(names - listed)
        gone = sorted(r["bundle"] for r in rows() if r["where"] == "missing")
        errs = []
        if missing:
            errs.append(f"bundles without a ledger row (no first_run.json, not seen before the ledger): {missing}")
        if gone:
            errs.append(f"ledger rows without a bundle: {gone}")
        for n, d, where in bundles():
            if where == "real" or os.path.isfile(os.path.join(d, "first_run.json")):
                errs += [f"{n}: {e}" for e in validate(d)]
            if where == "pending" and not os.path.isfile(os.path.join(d, "first_run.json")):
                errs.append(f"{n}: in samples/real-pending without a first run")
        if want != have:
            errs.append("samples/real/LEDGER.md is stale: run `python3 scripts/ledger.py render > samples/real/LEDGER.md`")
        for e in errs:
            print(e)
        print(f"ledger: {len(listed)} rows, {len(errs)} problems")
        return 1 if errs else 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
