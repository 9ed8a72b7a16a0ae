#!/usr/bin/env python3
"""Checks deploy/kubernetes/*.yaml without an API server: every document parses as YAML, has the
fields the API server would require of its kind, and says what docs/kubernetes.md promises: the
agent DaemonSet tolerates every taint, mounts /var/log/pods (read-only), /dev/kmsg and the journal
from the host, keeps its state on the host and names its node from spec.nodeName; its config
follows the CRI logs and points at the aggregator's ingest Service; the aggregator Deployment runs
on a postgresql:// store and its Service exposes the ports its arguments bind. Exit 1 with every
problem listed."""
import glob, os, sys
import yaml

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
problems = []

def need(cond, where, what):
    if not cond:
        problems.append(f"{where}: {what}")

def get(obj, *path):
    for p in path:
        if isinstance(obj, dict):
            obj = obj.get(p)
        elif isinstance(obj, list) and isinstance(p, int) and p < len(obj):
            obj = obj[p]
        else:
            return None
    return obj

docs = []
files = sorted(glob.glob(os.path.join(root, "deploy", "kubernetes", "*.yaml")))
need(files, "deploy/kubernetes", "no manifests")
for f in files:
    name = os.path.relpath(f, root)
    try:
        with open(f) as fh:
            for i, d in enumerate(yaml.safe_load_all(fh)):
                if d is None:
                    continue
                where = f"{name}#{i}"
                need(isinstance(d, dict), where, "not a mapping")
                if not isinstance(d, dict):
                    continue
                for key in ("apiVersion", "kind", "metadata"):
                    need(key in d, where, f"no {key}")
                need(get(d, "metadata", "name"), where, "no metadata.name")
                if d.get("kind") != "Namespace":
                    need(get(d, "metadata", "namespace") == "faultline", where, "not in namespace faultline")
                docs.append((where, d))
    except yaml.YAMLError as e:
        problems.append(f"{name}: not YAML: {e}")

by_kind = {}
for where, d in docs:
    by_kind.setdefault(d.get("kind"), []).append((where, d))

def workload(where, d):
    """Fields every Deployment / DaemonSet needs: a selector matching its pod template's labels,
    containers with names and images, volume mounts that name declared volumes."""
    sel = get(d, "spec", "selector", "matchLabels") or {}
    labels = get(d, "spec", "template", "metadata", "labels") or {}
    need(sel and all(labels.get(k) == v for k, v in sel.items()), where, "selector does not match the template's labels")
    pod = get(d, "spec", "template", "spec") or {}
    volumes = {v.get("name"): v for v in pod.get("volumes", [])}
    need(pod.get("containers"), where, "no containers")
    for c in pod.get("containers", []):
        need(c.get("name") and c.get("image"), where, "container without name or image")
        for m in c.get("volumeMounts", []):
            need(m.get("name") in volumes, where, f"mount {m.get('name')} names no volume")
    return pod, volumes

# The agent.
ds = [x for x in by_kind.get("DaemonSet", []) if get(x[1], "metadata", "name") == "faultline-agent"]
need(len(ds) == 1, "deploy/kubernetes", "one DaemonSet faultline-agent")
for where, d in ds:
    pod, volumes = workload(where, d)
    need({"operator": "Exists"} in (pod.get("tolerations") or []), where, "does not tolerate every taint (GPU, cordoned nodes)")
    c = pod["containers"][0]
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    def host(path):
        return get(volumes.get(mounts.get(path, {}).get("name"), {}), "hostPath", "path")
    need(host("/var/log") == "/var/log" or host("/var/log/pods") == "/var/log/pods", where, "no hostPath for /var/log/pods")
    for p in ("/var/log", "/var/log/pods"):
        if p in mounts:
            need(mounts[p].get("readOnly") is True, where, f"{p} is not mounted read-only")
    need(host("/dev/kmsg") == "/dev/kmsg", where, "no hostPath /dev/kmsg")
    need(get(volumes.get(mounts.get("/dev/kmsg", {}).get("name"), {}), "hostPath", "type") == "CharDevice", where, "/dev/kmsg is not a CharDevice")
    need(host("/run/log/journal") == "/run/log/journal", where, "no hostPath for the volatile journal")
    need(host("/etc/machine-id") == "/etc/machine-id", where, "no /etc/machine-id (sd-journal opens the host's journal by it)")
    need(host("/var/lib/faultline-agent") == "/var/lib/faultline-agent", where, "state (spool, checkpoints) not on the host")
    caps = get(c, "securityContext", "capabilities", "add") or []
    need("SYSLOG" in caps, where, "no CAP_SYSLOG for /dev/kmsg")
    need(get(c, "securityContext", "privileged") is not True, where, "privileged")
    env = {e["name"]: e for e in c.get("env", [])}
    need(get(env.get("NODE_NAME", {}), "valueFrom", "fieldRef", "fieldPath") == "spec.nodeName", where, "NODE_NAME not from spec.nodeName")
    need("$(NODE_NAME)" in (c.get("args") or []), where, "--hostname not $(NODE_NAME)")
    need(get(c, "resources", "limits", "memory"), where, "no memory limit")

cms = {get(d, "metadata", "name"): (w, d) for w, d in by_kind.get("ConfigMap", [])}
need("faultline-agent" in cms, "deploy/kubernetes", "no ConfigMap faultline-agent")
svc_ports = {}
for where, d in by_kind.get("Service", []):
    svc_ports[get(d, "metadata", "name")] = {p.get("name"): p.get("port") for p in get(d, "spec", "ports") or []}
if "faultline-agent" in cms:
    where, d = cms["faultline-agent"]
    try:
        cfg = yaml.safe_load(get(d, "data", "agent.yaml") or "")
    except yaml.YAMLError as e:
        cfg = None
        problems.append(f"{where}: agent.yaml is not YAML: {e}")
    if isinstance(cfg, dict):
        globs = cfg.get("file_globs") or []
        need("/var/log/pods/*/*/*.log" in globs, where, "file_globs does not follow /var/log/pods/*/*/*.log")
        need(not any(g.endswith("*") for g in globs), where, "a file glob matches rotated names (N.log.<stamp>)")
        eps = cfg.get("endpoints") or []
        need(any("faultline-aggregator.faultline.svc:%s" % svc_ports.get("faultline-aggregator", {}).get("ingest") in e for e in eps),
             where, "endpoints do not name the aggregator Service's ingest port")
        known = {"state_dir", "endpoints", "journald", "kmsg", "kernel_source", "fabricmanager_log", "file_globs",
                 "file_glob_interval_s", "hostname", "journal_dir", "kmsg_path", "curve_secret_key_file",
                 "curve_server_public_key", "files_from_start"}
        need(set(cfg) <= known, where, f"unknown agent keys {sorted(set(cfg) - known)}")

# The aggregator.
dep = [x for x in by_kind.get("Deployment", []) if get(x[1], "metadata", "name") == "faultline-aggregator"]
need(len(dep) == 1, "deploy/kubernetes", "one Deployment faultline-aggregator")
for where, d in dep:
    pod, volumes = workload(where, d)
    c = pod["containers"][0]
    args = c.get("args") or []
    def arg(flag):
        return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None
    need((arg("--store") or "").startswith("postgresql://"), where, "--store is not a postgresql:// URL")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    need(str(ports.get("http")) == arg("--port"), where, "containerPort http differs from --port")
    need((arg("--ingest-endpoint") or "").endswith(":%s" % ports.get("ingest")), where, "containerPort ingest differs from --ingest-endpoint")
    need(arg("--listen") == "0.0.0.0", where, "--listen is loopback: the Service cannot reach it")
    need(arg("--token-file") and arg("--read-token-file"), where, "no write and read tokens")
    sp = svc_ports.get("faultline-aggregator")
    need(sp and set(sp) >= {"http", "ingest"}, where, "the Service does not expose http and ingest")
    need(get(c, "securityContext", "runAsNonRoot") is True, where, "runs as root")

for p in problems:
    print(p)
print(f"{len(files)} files, {len(docs)} documents, {len(problems)} problems")
sys.exit(1 if problems else 0)
