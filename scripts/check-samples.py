#!/usr/bin/env python3
"""Runs `faultline attribute --json` on every sample and compares with its expected.json.
Prints one row per sample and a summary; exit 1 on any mismatch. Used by `make demo`."""
import json, os, subprocess, sys

def main():
    binary = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else "samples"
    names = sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "expected.json")))
    bad = 0
    print(f"{'sample':32} {'state':13} {'sub_domain':16} {'responsible':24} {'cause':30} ok")
    for n in names:
        exp = json.load(open(os.path.join(root, n, "expected.json")))
        p = subprocess.run([binary, "attribute", "--json", os.path.join(root, n)], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{n:32} ERROR {p.stderr.strip()[:80]}")
            bad += 1
            continue
        got = json.loads(p.stdout)
        resp = sorted(r["node"] for r in got["responsible_nodes"])
        cause = got["cause"]["rule_id"] if got["cause"] else None
        if got["sub_domain"] == "ambiguous":
            cause_ok = exp.get("cause_rule") in (None, *[c["rule_id"] for c in got["candidates"]])
        else:
            cause_ok = cause == exp.get("cause_rule")
        ok = (got["terminal_state"] == exp["terminal_state"] and got["sub_domain"] == exp["sub_domain"]
              and resp == sorted(exp["responsible_nodes"]) and cause_ok)
        bad += not ok
        rs = ",".join(resp) if len(resp) <= 2 else f"{resp[0]},+{len(resp)-1}"
        print(f"{n:32} {got['terminal_state']:13} {got['sub_domain']:16} {rs:24} {str(cause):30} {'yes' if ok else 'NO'}")
        if not ok:
            print(f"{'':32} expected: {exp['terminal_state']} {exp['sub_domain']} {exp['responsible_nodes']} {exp.get('cause_rule')}")
    print(f"{len(names) - bad} passed, {bad} failed")
    return 1 if bad else 0

sys.exit(main())
