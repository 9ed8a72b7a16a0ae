#!/usr/bin/env python3
"""What a confidence band is worth: runs `faultline attribute --json` on every bundle with an
expected.json (samples/, samples/real/, samples/real-pending/) and prints, per confidence band of
the verdict, how many verdicts fell in it, how many were exact (as samples_test judges them) and how
many had the domain and the nodes right (what an operator acts on, whatever the rule id).

  calibration.py BINARY [--markdown]

Verdicts that claim no cause (success, none, unattributed) have no band and are counted apart. The
pending real bundles are the ones the current rules still get wrong: they stay in, because a
calibration measured only on what passes would say nothing."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ledger  # noqa: E402

BANDS = [("strong", ">= 0.8"), ("likely", "0.5 - 0.8"), ("lead", "< 0.5"), (None, "no cause claimed")]


def bundles():
    root = os.path.join(ledger.ROOT, "samples")
    for base, kind in ((root, "sample"), (ledger.REAL, "real"), (ledger.PENDING, "pending")):
        if not os.path.isdir(base):
            continue
        for n in sorted(os.listdir(base)):
            d = os.path.join(base, n)
            if os.path.isfile(os.path.join(d, "expected.json")):
                yield n, d, kind


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary, markdown = sys.argv[1], "--markdown" in sys.argv[2:]
    table = {b: {"n": 0, "exact": 0, "acts": 0, "cw": 0, "wrong": []} for b, _ in BANDS}
    for name, d, kind in bundles():
        p = subprocess.run([binary, "attribute", "--json", d], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{name}: ERROR {p.stderr.strip()[:100]}", file=sys.stderr)
            continue
        doc = json.loads(p.stdout)
        got = ledger.verdict_of(doc)
        exp = ledger.verdict_of(ledger.load(os.path.join(d, "expected.json")))
        result = ledger.classify(exp, got)
        row = table[doc.get("confidence_band")]
        row["n"] += 1
        row["exact"] += result == "exact"
        # What an operator acts on: the domain and the nodes (the rule id aside).
        row["acts"] += got["sub_domain"] == exp["sub_domain"] and got["responsible_nodes"] == exp["responsible_nodes"]
        row["cw"] += result == "confident-wrong"
        if result != "exact":
            row["wrong"].append(f"{name} ({kind}, {result})")
    if markdown:
        print("| band | confidence | verdicts | exact | share | domain and nodes right | confident-wrong |")
        print("|---|---|---|---|---|---|---|")
    for band, rng in BANDS:
        r = table[band]
        share = f"{100 * r['exact'] // r['n']} %" if r["n"] else "-"
        acts = f"{r['acts']} ({100 * r['acts'] // r['n']} %)" if r["n"] else "-"
        if markdown:
            print(f"| {band or '(none)'} | {rng} | {r['n']} | {r['exact']} | {share} | {acts} | {r['cw']} |")
        else:
            print(f"{band or '(none)':8} {rng:18} {r['n']:4} verdicts, {r['exact']:4} exact ({share}), domain and nodes "
                  f"right {acts}, {r['cw']} confident-wrong")
    if not markdown:
        for band, _ in BANDS:
            for w in table[band]["wrong"]:
                print(f"  {band or '(none)'}: {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
