#!/usr/bin/env python3
"""Lists C++ functions longer than a limit (issue 32: "no function in aggregator/ or agent/ longer
than ~80 lines except generated code").

    python3 scripts/function-lengths.py [--limit 80] [DIR ...]   (default: aggregator agent)

A function is a brace block opened at namespace or class scope after a parameter list (a `)`
before the `{`, allowing `const`, `override`, `noexcept`, `-> T`, a constructor's initialiser
list); its length counts the lines from the signature's first line to the closing brace. Comments,
strings, character literals and raw strings are skipped, so braces inside them do not count.
Generated code lives in the build tree, never in these folders. Prints the offenders, longest
first, as `lines  file:line  name`, and exits 1 when there are any (0 otherwise), so a test or CI
step can hold the limit.
"""
import argparse
import os
import re
import sys

SOURCE_EXT = (".cpp", ".cc", ".h", ".hpp")


def strip_code(text):
    """The text with comments, strings and character literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and re.search(r"\b\d[\w']*$", text[max(0, i - 24):i]):
            out.append(c)  # a digit separator (60'000'000), not a character literal
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


NON_FUNCTION = re.compile(r"\b(namespace|class|struct|union|enum)\b[^;(){}]*$")
FUNCTION_TAIL = re.compile(
    r"\)\s*(const|override|final|noexcept|mutable|&|&&|\s|->\s*[\w:<>,\s*&]+)*$"
    r"|\)\s*:\s*[\w:]+[({].*$",  # a constructor's initialiser list
    re.S)


def functions(path):
    """(first line, last line, name) of each function defined at namespace or class scope."""
    with open(path, encoding="utf-8", errors="replace") as f:
        code = strip_code(f.read())
    found = []
    stack = []  # per open brace: ('scope' | 'function' | 'block', start line, name)
    head_start = 0  # where the text before the next brace began (after the last ; { or })
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        if c == ";":
            head_start = i + 1
        elif c == "{":
            head = code[head_start:i]
            inside_function = any(kind == "function" for kind, _, _ in stack)
            stripped = " ".join(head.split())
            if inside_function:
                stack.append(("block", line, ""))
            elif NON_FUNCTION.search(stripped) or stripped.endswith("extern \"C\""):
                stack.append(("scope", line, ""))
            elif FUNCTION_TAIL.search(stripped) and not re.search(r"=\s*\[", stripped):
                lead = len(head) - len(head.lstrip("\n \t"))
                first = line - code[head_start + lead:i].count("\n")
                name = re.search(r"([~\w:]+(?:<[^()]*>)?|operator\s*\S+)\s*\(", stripped)
                stack.append(("function", first, name.group(1) if name else stripped[:40]))
            else:
                stack.append(("block", line, ""))  # an initialiser, a lambda at namespace scope
            head_start = i + 1
        elif c == "}":
            if stack:
                kind, first, name = stack.pop()
                if kind == "function":
                    found.append((first, line, name))
            head_start = i + 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=80)
    ap.add_argument("dirs", nargs="*", default=["aggregator", "agent"])
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rows = []
    for d in args.dirs:
        base = d if os.path.isabs(d) else os.path.join(root, d)
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, name)
                for first, last, fn in functions(path):
                    length = last - first + 1
                    if length > args.limit:
                        rows.append((length, os.path.relpath(path, root), first, fn))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    for length, path, first, fn in rows:
        print(f"{length:5d}  {path}:{first}  {fn}")
    print(f"{len(rows)} function(s) over {args.limit} lines in {', '.join(args.dirs)}", file=sys.stderr)
    return 1 if rows else 0


if __name__ == "__main__":
    sys.exit(main())
