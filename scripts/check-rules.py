#!/usr/bin/env python3
"""Validate faultline rule packs (rules/**/*.yaml) without the C++ engine.

Usage: scripts/check-rules.py [DIR ...]      (default: the repo's rules/)

Checks, per docs/rules.md:
  * YAML loads; pack/rule keys are known; required keys present; enums valid;
  * rule ids unique across every pack loaded;
  * {{DEFINE}} expansion (per pack) and regex compiles; patterns written as YAML
    single-quoted strings; RE2-incompatible syntax rejected (lookaround,
    backreferences, possessive quantifiers, \\Z, inline flags not at start, ...);
  * every {capture} used in summary/device/node exists in the pattern (or is {host});
  * every `match` example contains a prefilter literal and is matched by the pattern,
    no `no_match` example is matched by the pattern;
  * engine cross-check: for every `match` example, the rule that wins among ALL
    loaded rules (prefilter literal present, pattern matches, highest priority,
    ties -> first loaded in sorted file order) is the rule that owns the example.

Python `re` stands in for RE2; the lint below keeps patterns to the common subset.
Prints `file:line: why` per problem and exits 1 if there is any.
"""

import glob
import os
import re
import sys

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.exit("check-rules: PyYAML missing (apt-get install -y python3-yaml)")

PACK_KEYS = {"pack", "description", "defines", "rules"}
REQUIRED = ["id", "since", "symptom", "sub_domain", "category", "role", "severity",
            "prefilter", "pattern", "summary", "meaning", "action", "examples"]
OPTIONAL = {"priority", "sources", "deprecated", "fallback_root", "nvidia", "device", "node",
            "fields"}
RULE_KEYS = set(REQUIRED) | OPTIONAL
NVIDIA_KEYS = {"immediate", "investigatory", "nvsentinel_action", "nvsentinel_severity",
               "causes"}
SUB_DOMAINS = {"hardware", "network", "system_software", "infrastructure", "application", "none"}
ROLES = {"root", "cascade", "teardown", "context"}
SEVERITIES = {"critical", "error", "warning", "info"}
SOURCES = {"kernel", "journal", "fabricmanager", "application"}
ID_RE = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
SNAKE_RE = re.compile(r"^[a-z0-9_]+$")
DEFINE_RE = re.compile(r"\{\{([A-Za-z0-9_]+)\}\}")
TEMPLATE_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

# Syntax Python accepts but RE2 rejects (or means differently).
RE2_LINT = [
    (re.compile(r"\(\?<?[=!]"), "lookahead/lookbehind is not RE2"),
    (re.compile(r"\(\?P=\w+\)"), "named backreference is not RE2"),
    (re.compile(r"(?<!\\)(?:\\\\)*\\[1-9]"), "backreference is not RE2"),
    (re.compile(r"(?<!\\)(?:\\\\)*\\Z"), "\\Z is not RE2 ($ or \\z)"),
    (re.compile(r"(?:[*+?]|\})\+"), "possessive quantifier is not RE2"),
    (re.compile(r"\(\?>"), "atomic group is not RE2"),
    (re.compile(r"\(\?<\w+>"), "use (?P<name>...) for named groups"),
    (re.compile(r"\(\?\("), "conditional group is not RE2"),
]
INLINE_FLAGS = re.compile(r"\(\?[a-zA-Z]+\)")


class LineLoader(yaml.SafeLoader):
    """SafeLoader that remembers each mapping's line and each scalar's quoting style."""


def _construct_mapping(loader, node):
    loader.flatten_mapping(node)
    out = {}
    styles = {}
    for k, v in node.value:
        key = loader.construct_object(k, deep=True)
        out[key] = loader.construct_object(v, deep=True)
        if isinstance(v, yaml.ScalarNode):
            styles[key] = v.style
    out["__line__"] = node.start_mark.line + 1
    out["__styles__"] = styles
    return out


LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def strip_meta(d):
    return {k: v for k, v in d.items() if k not in ("__line__", "__styles__")}


class Rule:
    def __init__(self, path, line, order, data, regex):
        self.path, self.line, self.order, self.data, self.regex = path, line, order, data, regex
        self.id = data.get("id")
        self.priority = data.get("priority", 0) or 0
        pf = data.get("prefilter")
        self.prefilters = pf if isinstance(pf, list) else [pf]
        self.deprecated = bool(data.get("deprecated", False))

    def fires(self, text):
        if self.deprecated or self.regex is None:
            return None
        if not any(p in text for p in self.prefilters):
            return None
        return self.regex.search(text)


def lint_re2(pattern):
    problems = [why for rx, why in RE2_LINT if rx.search(pattern)]
    for m in INLINE_FLAGS.finditer(pattern):
        if m.start() != 0:
            problems.append("inline flags only at the start of a pattern")
    return problems


def load(dirs):
    problems = []
    rules = []
    files = []
    for d in dirs:
        files += glob.glob(os.path.join(d, "**", "*.yaml"), recursive=True)
    files = sorted(set(files))
    if not files:
        problems.append(f"{' '.join(dirs)}:0: no rule files found")
    packs = {}
    order = 0
    for path in files:
        def err(line, why, path=path):
            problems.append(f"{path}:{line}: {why}")
        try:
            with open(path, encoding="utf-8") as f:
                doc = yaml.load(f, Loader=LineLoader)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            err(mark.line + 1 if mark else 0, f"YAML error: {e}")
            continue
        if not isinstance(doc, dict):
            err(1, "pack is not a mapping")
            continue
        for k in strip_meta(doc):
            if k not in PACK_KEYS:
                err(doc["__line__"], f"unknown pack key '{k}'")
        name = doc.get("pack")
        if not name:
            err(1, "missing 'pack'")
        elif name in packs:
            err(1, f"duplicate pack name '{name}' (also in {packs[name]})")
        else:
            packs[name] = path
        defines = strip_meta(doc.get("defines") or {})
        for k, style in (doc.get("defines") or {}).get("__styles__", {}).items():
            if style != "'":
                err(doc["defines"]["__line__"], f"define {k} must be a single-quoted string")
        for rd in doc.get("rules") or []:
            order += 1
            line = rd.get("__line__", 0)
            data = strip_meta(rd)
            rid = data.get("id", f"<rule at line {line}>")
            for k in data:
                if k not in RULE_KEYS:
                    err(line, f"{rid}: unknown key '{k}'")
            for k in REQUIRED:
                if k not in data or data[k] in (None, "", []):
                    err(line, f"{rid}: missing '{k}'")
            if not isinstance(data.get("id"), str) or not ID_RE.match(data.get("id", "")):
                err(line, f"{rid}: id must be dotted lower snake_case")
            if "symptom" in data and not SNAKE_RE.match(str(data["symptom"])):
                err(line, f"{rid}: symptom must be snake_case")
            for key, allowed in (("sub_domain", SUB_DOMAINS), ("role", ROLES),
                                 ("severity", SEVERITIES)):
                if key in data and data[key] not in allowed:
                    err(line, f"{rid}: {key} '{data[key]}' not one of {sorted(allowed)}")
            for s in data.get("sources") or []:
                if s not in SOURCES:
                    err(line, f"{rid}: unknown source '{s}'")
            if "priority" in data and not isinstance(data["priority"], int):
                err(line, f"{rid}: priority must be an integer")
            for k in ("deprecated", "fallback_root"):
                if k in data and not isinstance(data[k], bool):
                    err(line, f"{rid}: {k} must be true/false")
            if data.get("fallback_root") and data.get("role") not in ("cascade", "teardown"):
                err(line, f"{rid}: fallback_root only makes sense on cascade/teardown rules")
            if "nvidia" in data:
                nv = data["nvidia"]
                if not isinstance(nv, dict):
                    err(line, f"{rid}: nvidia must be a mapping")
                else:
                    for k in strip_meta(nv):
                        if k not in NVIDIA_KEYS:
                            err(line, f"{rid}: unknown nvidia key '{k}'")
            if "fields" in data and not isinstance(data["fields"], dict):
                err(line, f"{rid}: fields must be a mapping")
            pf = data.get("prefilter")
            pfs = pf if isinstance(pf, list) else [pf]
            if not pfs or not all(isinstance(p, str) and p for p in pfs):
                err(line, f"{rid}: prefilter must be a non-empty literal or list of literals")
                pfs = []
            if rd.get("__styles__", {}).get("pattern") not in ("'", None) and "pattern" in data:
                err(line, f"{rid}: pattern must be a YAML single-quoted string")
            raw = data.get("pattern")
            regex = None
            if isinstance(raw, str):
                missing = [n for n in DEFINE_RE.findall(raw) if n not in defines]
                if missing:
                    err(line, f"{rid}: undefined {{{{{', '.join(missing)}}}}}")
                expanded = DEFINE_RE.sub(lambda m: str(defines.get(m.group(1), "")), raw)
                for why in lint_re2(expanded):
                    err(line, f"{rid}: {why}")
                try:
                    regex = re.compile(expanded)
                except re.error as e:
                    err(line, f"{rid}: bad regex: {e}")
            if regex is not None:
                caps = set(regex.groupindex) | {"host"}
                for key in ("summary", "device", "node"):
                    for name in TEMPLATE_RE.findall(str(data.get(key, ""))):
                        if name not in caps:
                            err(line, f"{rid}: {key} uses {{{name}}}, not a capture of the pattern")
                for name in regex.groupindex:
                    if name in (data.get("fields") or {}):
                        pass  # a constant field next to a capture: the capture documents it
            ex = data.get("examples") or {}
            if not isinstance(ex, dict) or not ex.get("match") or not ex.get("no_match"):
                err(line, f"{rid}: examples need at least one match and one no_match")
                ex = {"match": [], "no_match": []} if not isinstance(ex, dict) else ex
            if regex is not None and not data.get("deprecated"):
                for text in ex.get("match") or []:
                    if pfs and not any(p in text for p in pfs):
                        err(line, f"{rid}: no prefilter literal in match example: {text!r}")
                    if not regex.search(text):
                        err(line, f"{rid}: pattern does not match example: {text!r}")
                for text in ex.get("no_match") or []:
                    if regex.search(text):
                        err(line, f"{rid}: pattern matches no_match example: {text!r}")
            rules.append(Rule(path, line, order, data, regex))
    return rules, problems


def cross_check(rules):
    problems = []
    seen = {}
    for r in rules:
        if r.id in seen:
            problems.append(f"{r.path}:{r.line}: duplicate id '{r.id}' "
                            f"(first at {seen[r.id].path}:{seen[r.id].line})")
        else:
            seen[r.id] = r
    for r in rules:
        if r.deprecated or r.regex is None:
            continue
        for text in (r.data.get("examples") or {}).get("match") or []:
            winner = None
            for other in rules:  # already in load order
                if other.fires(text) and (winner is None or other.priority > winner.priority):
                    winner = other
            if winner is not None and winner is not r:
                problems.append(f"{r.path}:{r.line}: {r.id}: example is won by {winner.id} "
                                f"(priority {winner.priority} vs {r.priority}): {text!r}")
    return problems


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs = argv[1:] or [os.path.join(root, "rules")]
    rules, problems = load(dirs)
    problems += cross_check(rules)
    for p in problems:
        print(p)
    n_ex = sum(len((r.data.get("examples") or {}).get("match") or []) +
               len((r.data.get("examples") or {}).get("no_match") or []) for r in rules)
    print(f"check-rules: {len(rules)} rules, {n_ex} examples, {len(problems)} problems",
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
