#!/usr/bin/env python3
"""Turn `faultline rules list --patterns` output (RE2) into a ripgrep pattern file.

RE2 and Rust regex syntax are nearly identical; the differences that matter for `rg -f`:

* rg joins all patterns of a -f file into one regex with `|`, so a capture name used by two rules
  (`pci`, `pid`, ...) is a "duplicate capture group name" error. Named groups become
  non-capturing groups; captures play no role in counting matching lines.
* rg searches line by line and rejects a literal `\\n` outside a character class. The rules use
  it only as `(?:[\\s\\S]*\\n)?` (optional "any earlier lines of a multi-line record"), which on a
  single line can only match the empty string: it is removed. A pattern that still has a literal
  `\\n` afterwards is reported and dropped.

The rewritten file is compiled by rg once; only if that fails is every pattern compiled on its
own, and the rejected ones are reported and dropped. Usage: rg_patterns.py IN OUT [RG]; prints a summary on stderr and "used N" on stdout.
"""
import re
import subprocess
import sys


def literal_newline_outside_class(p):
    i, in_class = 0, False
    while i < len(p):
        c = p[i]
        if c == "\\":
            if p[i + 1:i + 2] == "n" and not in_class:
                return True
            i += 2
            continue
        if in_class:
            if c == "[" and p[i + 1:i + 2] == ":":  # [[:alpha:]]
                end = p.find(":]", i + 2)
                i = end + 2 if end >= 0 else i + 1
                continue
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            i += 1
            if p[i:i + 1] == "^":
                i += 1
            if p[i:i + 1] == "]":  # leading ] is literal
                i += 1
            continue
        i += 1
    return False


def transform(p):
    changes = []
    q = re.sub(r"\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>", "(?:", p)
    if q != p:
        changes.append("named groups -> (?:")
    for multi in (r"(?:[\s\S]*\n)?", r"(?:[\s\S]*?\n)?"):
        if multi in q:
            q = q.replace(multi, "")
            changes.append(f"removed {multi}")
    return q, changes


def rg_accepts(rg, p):
    r = subprocess.run([rg, "-q", "-e", p, "/dev/null"], capture_output=True, text=True)
    return r.returncode in (0, 1), r.stderr.strip().splitlines()[:1]


def rg_accepts_file(rg, path):
    r = subprocess.run([rg, "-q", "-f", path, "/dev/null"], capture_output=True, text=True)
    return r.returncode in (0, 1), r.stderr


def main():
    src, dst = sys.argv[1], sys.argv[2]
    rg = sys.argv[3] if len(sys.argv) > 3 else "rg"
    pats = [l.rstrip("\n") for l in open(src, encoding="utf-8") if l.strip()]
    ok_all, err_all = rg_accepts_file(rg, src)
    if not ok_all:
        why = [l.strip() for l in err_all.splitlines() if l.strip().startswith("error:") or "not allowed" in l]
        print(f"rg_patterns: rg rejects the pattern file as-is: {'; '.join(why) or err_all.strip()[-200:]}",
              file=sys.stderr)
    used, dropped = [], []
    for n, p in enumerate(pats, 1):
        q, changes = transform(p)
        if any(c.startswith("removed") for c in changes):
            raw_ok, raw_err = rg_accepts(rg, p)
            print(f"rg_patterns: pattern {n} {'accepted' if raw_ok else 'REJECTED'} by rg as-is"
                  f"{' (' + raw_err[0] + ')' if raw_err and not raw_ok else ''}; rewritten "
                  f"({'; '.join(changes)}): {p[:90]}...", file=sys.stderr)
        if literal_newline_outside_class(q):
            dropped.append((n, "literal \\n outside a class", p))
            continue
        used.append((n, q, p))
    with open(dst, "w", encoding="utf-8") as f:
        f.write("".join(q + "\n" for _, q, _ in used))
    ok, _ = rg_accepts_file(rg, dst)
    if not ok:  # find the culprits one by one (slow path)
        keep = []
        for n, q, p in used:
            good, err = rg_accepts(rg, q)
            if good:
                keep.append((n, q, p))
            else:
                dropped.append((n, err[0] if err else "rejected", p))
        used = keep
        with open(dst, "w", encoding="utf-8") as f:
            f.write("".join(q + "\n" for _, q, _ in used))
        ok, err = rg_accepts_file(rg, dst)
        if not ok:
            sys.exit(f"rg_patterns: rg still rejects the pattern file: {err.strip()[-300:]}")
    for n, why, p in dropped:
        print(f"rg_patterns: pattern {n} DROPPED ({why}): {p}", file=sys.stderr)
    print(f"rg_patterns: {len(pats)} patterns; named groups made non-capturing wherever present; "
          f"{len(dropped)} dropped; {len(used)} used", file=sys.stderr)
    print(f"{len(pats)} {len(used)}")


if __name__ == "__main__":
    main()
