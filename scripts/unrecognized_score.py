#!/usr/bin/env python3
"""Issue 30's done-when figures: evidence without rules on the real bundles.

Runs `faultline attribute --json` on every bundle of samples/real and samples/real-pending with an
expected.json and keeps those the rules leave without a localized cause: sub_domain unattributed,
or a failed job whose verdict names no responsible node. Over those it prints

  (a) the share where `unrecognized` (the failure-indicating lines no rule matched) holds the line
      the thread names as the cause: expected.json `cause_line_contains` (a substring of that
      line, taken from the thread, never from faultline's output; samples/README.md), compared
      case-insensitively with each entry's first_line and template;
  (b) the share where `divergent_node` is the thread's node (expected.json responsible_nodes), over
      those whose thread names a node; and how often a lead was given where the thread names none.

Usage: scripts/unrecognized_score.py build/aggregator/faultline [ROOT...] [--markdown] [--verbose]
"""
import json, os, subprocess, sys


def bundles(roots):
    for root in roots:
        for name in sorted(os.listdir(root)):
            d = os.path.join(root, name)
            if os.path.isfile(os.path.join(d, "expected.json")):
                yield d


def unlocalized(got):
    if got["sub_domain"] == "unattributed":
        return True
    return got["terminal_state"] not in ("success",) and got["sub_domain"] != "none" and not got["responsible_nodes"]


def holds(entry, needle):
    n = needle.lower()
    return n in entry.get("first_line", "").lower() or n in entry.get("template", "").lower()


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    markdown, verbose = "--markdown" in sys.argv, "--verbose" in sys.argv
    if not args:
        print(__doc__)
        return 2
    binary, roots = args[0], args[1:] or ["samples/real", "samples/real-pending"]
    rows = []
    for d in bundles(roots):
        exp = json.load(open(os.path.join(d, "expected.json")))
        p = subprocess.run([binary, "attribute", "--json", d], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{d}: faultline failed: {p.stderr.strip()[:120]}", file=sys.stderr)
            continue
        got = json.loads(p.stdout)
        if not unlocalized(got):
            continue
        needle = exp.get("cause_line_contains")
        unrec = got.get("unrecognized", [])
        rank = next((i + 1 for i, u in enumerate(unrec) if needle and holds(u, needle)), None)
        lead = (got.get("divergent_node") or {}).get("node")
        rows.append({"bundle": d, "verdict": got["sub_domain"], "needle": needle, "rank": rank,
                     "listed": len(unrec), "lead": lead, "want_nodes": exp.get("responsible_nodes", []),
                     "nodes": len({c["node"] for c in got.get("coverage", []) if c.get("node")})})

    # (a) is over the verdicts the rules leave unattributed (the done-when); (b) also over
    # verdicts with a cause but no node.
    with_line = [r for r in rows if r["needle"] and r["verdict"] == "unattributed"]
    found = [r for r in with_line if r["rank"]]
    top5 = [r for r in found if r["rank"] <= 5]
    named = [r for r in rows if r["want_nodes"]]
    lead_right = [r for r in named if r["lead"] in r["want_nodes"]]
    lead_wrong = [r for r in rows if r["lead"] and r["lead"] not in r["want_nodes"]]
    multi = [r for r in named if r["nodes"] >= 2]

    def pct(a, b):
        return f"{100 * a / b:.0f} %" if b else "n/a"

    if verbose:
        for r in rows:
            print(f"{r['bundle']:60} {r['verdict']:14} listed={r['listed']:<3} rank={r['rank']} "
                  f"lead={r['lead']} thread_nodes={r['want_nodes']} needle={r['needle']!r}")
        print()
    lines = [
        ("bundles the rules leave without a localized cause", len(rows),
         f"{sum(r['verdict'] == 'unattributed' for r in rows)} unattributed"),
        ("... unattributed, with the thread's cause line (cause_line_contains)", len(with_line), ""),
        ("(a) unrecognized holds the thread's cause line", f"{len(found)} of {len(with_line)}", pct(len(found), len(with_line))),
        ("    ... within the first five entries", f"{len(top5)} of {len(with_line)}", pct(len(top5), len(with_line))),
        ("... whose thread names a node", len(named), f"{len(multi)} with logs of two or more nodes"),
        ("(b) divergent_node is the thread's node", f"{len(lead_right)} of {len(named)}", pct(len(lead_right), len(named))),
        ("    a lead where the thread names another node or none", len(lead_wrong), ""),
    ]
    if markdown:
        print("| figure | count | share |")
        print("|---|---|---|")
        for a, b, c in lines:
            print(f"| {a} | {b} | {c} |")
    else:
        for a, b, c in lines:
            print(f"{a:68} {str(b):12} {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
