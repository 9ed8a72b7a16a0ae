#!/usr/bin/env python3
"""Generate rules/nvidia/xid.yaml from NVIDIA's Xid catalog.

Usage: scripts/gen-xid-rules.py [CATALOG_TSV] [OUT_YAML]
  defaults: ../shared/reference/xid_catalog.tsv (relative to the repo root, falling back to
  /work/shared/reference/xid_catalog.tsv) and rules/nvidia/xid.yaml.
The output is committed; rerun after the catalog changes and review the diff.

How each Xid gets its sub_domain, role, severity and category
------------------------------------------------------------
The catalog gives, per Xid, NVIDIA's immediate action (RESTART_APP, RESET_GPU, RESTART_BM,
CONTACT_SUPPORT, IGNORE, WORKFLOW_*), investigatory action, NVSentinel's action/severity, and
the legacy list of potential causes (hw, driver, user_app, sysmem, bus, thermal, fb).

sub_domain (first rule that applies):
  1. explicit decisions for the well-known Xids (OVERRIDES below), e.g. 13/31 -> application
     (NVIDIA's own workflows for them start with "check the application"), 119/120 -> system_
     software (GSP firmware), 74 and NVLink5 144-150 -> network (the GPU's fabric link);
  2. mnemonic names an NVLink/C2C error -> network (NVLink) / hardware (C2C);
  3. causes contain `hw` -> hardware (when NVIDIA lists the hardware at all, a node fault is
     the thing an operator must rule out first);
  4. causes contain `user_app` (without hw) -> application when NVIDIA's immediate action is
     RESTART_APP, else system_software (driver-side illegal access, InfoROM wear ...);
  5. causes are only driver/sysmem/bus/fb/thermal -> system_software;
  6. no causes listed (newer Xids): RESET_GPU/RESTART_BM/CONTACT_SUPPORT/RESTART_APP on an engine
     -> hardware, otherwise system_software.
role:
  * root by default: any Xid with an action other than IGNORE can end the job by itself;
  * context when NVIDIA says IGNORE (immediate) and NVSentinel does not escalate, or when the Xid
    only annotates another one (154 recovery action changed, 63 row-remap *event*, SMBPBI test
    messages 106/107);
  * cascade: 43 (channel stopped — follows an app fault or a GPU loss; alone it decides
    nothing, docs/taxonomy.md), 145 (NVLink5 RLW, a follow-on of 149), 171/172 (details attached
    to Xid 48); the last three carry fallback_root so a lone one still anchors a low-confidence
    verdict;
  * teardown: 45 (preemptive cleanup after earlier errors). No fallback_root: the driver logs
    it whenever a process holding GPU contexts is killed, which is how every rank of a failed
    job ends, so alone it cannot tell a fault from the teardown (NVIDIA's "Solo: RESTART_FM"
    stays in the action text).
  Brief-mandated roots regardless of IGNORE: 92 (high SBE rate, warning) and 121 (C2C).
severity:
  * critical: NVSentinel FATAL and the immediate action needs a GPU reset / reboot / workflow
    (RESET_GPU, RESTART_BM, RESTART_VM, WORKFLOW_*, CHECK_MECHANICALS, UPDATE_SWFW);
  * error: other FATAL (mostly "Unused" numbers -> CONTACT_SUPPORT) and NONFATAL RESTART_APP;
  * warning: IGNORE/NONFATAL roots; info: context roles.
priority: 50 for every Xid rule (so a kernel Xid line never loses to a generic rule that also
  matches its text); they do not compete with each other because each pattern pins its number.
"""

import csv
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SINCE = "0.1.0"

# Shared Xid line regex. Head: PCI id in any driver spelling ("PCI:0000:3b:00",
# "0000:3b:00" on old drivers, 8-digit domain, optional ".0"), optional MIG "GPU-I:05".
# Tail: optional pid (numeric or '<unknown>'), optional name, and an optional
# "(caused by previous Xid N)" anywhere later on the line (570+ drivers print it without the
# parentheses: kernel_rc.c " caused by previous Xid %d").
XID_HEAD = (r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}"
            r"(?:\.[0-7])?)(?: GPU-I:(?P<gpu_instance>[0-9A-Fa-f]+))?[^)]*\): ")
XID_TAIL = (r"\b,?(?: pid=(?:'?<unknown>'?|(?P<pid>[0-9]+)),)?"
            r"(?: name=(?:'?<unknown>'?|(?P<name>[^,\n]*)),)?"
            r"(?:[^\n]*?\(?caused by previous Xid (?P<prev_xid>[0-9]+)\)?)?")

# Explicit decisions: xid -> dict(symptom, sub_domain, role, severity, category, meaning,
# fallback_root, detail (example line tail)).
OVERRIDES = {
    13: dict(symptom="gpu_graphics_engine_exception", sub_domain="application", role="root",
             severity="error", category="gpu",
             detail="Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
             meaning="A GPU engine raised an exception while running a kernel, most often an "
                     "out-of-range or misaligned access, an illegal instruction or a failed "
                     "device-side assert in the application. NVIDIA's Xid 13 workflow starts "
                     "with the application; only if it recurs across applications on the same "
                     "GPU is hardware suspected."),
    31: dict(symptom="gpu_mmu_fault", sub_domain="application", role="root", severity="error",
             category="gpu",
             detail="Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 "
                    "faulted @ 0x7f00_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
             meaning="GPU memory page fault: a kernel accessed a virtual address that is not "
                     "mapped (use-after-free, out-of-bounds, bad pointer). Usually the "
                     "application (the CUDA error it sees is 'an illegal memory access was "
                     "encountered'); rarely a driver or hardware fault."),
    43: dict(symptom="gpu_channel_stopped", sub_domain="application", role="cascade",
             severity="warning", category="gpu", detail="Ch 00000010",
             meaning="The driver stopped a GPU channel because its context hit a fault. Almost "
                     "always a consequence of an earlier error (Xid 13/31 in the application, "
                     "or a lost GPU); the GPU itself remains usable."),
    45: dict(symptom="gpu_preemptive_cleanup", sub_domain="system_software", role="teardown",
             severity="info", category="gpu", detail="Ch 00000010",
             meaning="The driver is tearing down GPU contexts because of earlier errors (or "
                     "because the process was killed). Noise of the teardown; when it is the "
                     "only Xid, NVIDIA suggests restarting Fabric Manager."),
    48: dict(symptom="gpu_ecc_dbe", sub_domain="hardware", role="root", severity="critical",
             category="gpu_memory",
             detail="An uncorrectable double bit error (DBE) has been detected on GPU in the "
                    "framebuffer at partition 6, subpartition 0.",
             meaning="An uncorrectable (double-bit) ECC error in GPU memory. Applications using "
                     "the GPU are killed; the page/row is retired or remapped at the next GPU "
                     "reset."),
    62: dict(symptom="gpu_pmu_halt", category="gpu_firmware"),
    63: dict(symptom="gpu_row_remap_event", sub_domain="hardware", role="context",
             severity="info", category="gpu_memory",
             detail="Row Remapper: New row (0x00000000000a1b2c) marked for remapping, reset gpu "
                    "to activate.",
             meaning="The driver recorded a row remapping (or, on pre-Ampere GPUs, a page "
                     "retirement) after an ECC error. Bookkeeping that follows an ECC error; the "
                     "remap takes effect at the next GPU reset."),
    64: dict(symptom="gpu_row_remap_failure", sub_domain="hardware", role="root",
             severity="critical", category="gpu_memory", detail="Row remapper error",
             meaning="Recording a row remapping / page retirement failed: the memory error "
                     "cannot be repaired in the field (remap resources exhausted or InfoROM "
                     "write failed)."),
    74: dict(symptom="nvlink_error", sub_domain="network", role="root", severity="critical",
             category="nvlink",
             detail="NVLink: fatal error detected on link 4(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
             meaning="An NVLink error on the GPU side of a link (training, replay/recovery "
                     "exhaustion, fatal DL/TL error). The register dump tells the link; NVIDIA's "
                     "NVLink workflow decides between a GPU reset and hardware replacement."),
    79: dict(symptom="gpu_fallen_off_bus", sub_domain="hardware", role="root",
             severity="critical", category="gpu", detail="GPU has fallen off the bus.",
             meaning="The GPU stopped responding on PCIe and the driver lost it; everything "
                     "using it fails. Causes listed by NVIDIA: hardware, driver, system memory, "
                     "PCIe bus, thermal. Other Xids that follow (43, 45, 154) are consequences."),
    92: dict(symptom="gpu_high_sbe_rate", sub_domain="hardware", role="root", severity="warning",
             category="gpu_memory", detail="High single-bit ECC error rate",
             meaning="The GPU is correcting single-bit ECC errors at a high rate. Not fatal by "
                     "itself, but a sign of degrading memory that often precedes DBEs."),
    94: dict(symptom="gpu_ecc_contained", sub_domain="hardware", role="root", severity="error",
             category="gpu_memory", detail="Contained: SM (0x1). RST: No, D-RST: No",
             meaning="An uncorrectable memory error that the GPU contained to the affected "
                     "processes (Ampere+): those applications die, others keep running, the GPU "
                     "does not need a reset."),
    95: dict(symptom="gpu_ecc_uncontained", sub_domain="hardware", role="root",
             severity="critical", category="gpu_memory",
             detail="Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No",
             meaning="An uncorrectable memory error that could not be contained: every process "
                     "on the GPU is affected and the GPU must be reset."),
    119: dict(symptom="gsp_rpc_timeout", sub_domain="system_software", role="root",
              severity="critical", category="gpu_firmware",
              detail="Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected "
                     "function 76 (GSP_RM_CONTROL) (0x20802a02 0x8).",
              meaning="The driver timed out waiting for the GPU System Processor (GSP firmware). "
                      "Commonly a driver/firmware issue (some drivers run with GSP disabled to "
                      "avoid it), but NVIDIA also lists hardware, PCIe, thermal and memory. The "
                      "GPU is unusable until reset."),
    120: dict(symptom="gsp_error", sub_domain="system_software", role="root",
              severity="critical", category="gpu_firmware",
              detail="GSP task timeout @ pc:0x4bd36c4, task: 1",
              meaning="The GPU System Processor firmware reported an error. Driver/firmware side "
                      "first, but NVIDIA lists hardware causes too. The GPU needs a reset."),
    121: dict(symptom="c2c_link_error", sub_domain="hardware", role="root", severity="warning",
              category="c2c"),
    140: dict(symptom="gpu_ecc_unrecovered", sub_domain="hardware", role="root",
              severity="critical", category="gpu_memory",
              detail="An uncorrectable ECC error detected (possible firmware handling failure) "
                     "DRAM:-1840691462, LTC:0, MMU:0, PCIE:0"),
    143: dict(symptom="gpu_init_error", category="gpu"),
    144: dict(symptom="nvlink5_saw_error"),
    145: dict(symptom="nvlink5_rlw_error", role="cascade", fallback_root=True,
              detail="RLW_REMAP Nonfatal XC0 i0 Link 02 (0x00000000 0x00000000 0x00000000 "
                     "0x00000000 0x00000000 0x00000000)",
              meaning="NVLink5 RLW (remap/lookup) error. In practice it follows an NVLink5 NETIR "
                      "error (Xid 149) on the same or a peer GPU; alone it points at the NVLink "
                      "fabric."),
    146: dict(symptom="nvlink5_tlw_error"),
    147: dict(symptom="nvlink5_trex_error"),
    148: dict(symptom="nvlink5_nvlpw_ctrl_error"),
    149: dict(symptom="nvlink5_netir_error",
              detail="NETIR_LINK_EVT Fatal XC0 i0 Link 03 (0x0004c0a6 0x00000000 0x00000000 "
                     "0x00000000 0x00000000 0x00000000)"),
    150: dict(symptom="nvlink5_mse_error"),
    154: dict(symptom="gpu_recovery_action_changed", sub_domain="hardware", role="context",
              severity="info", category="gpu",
              detail="GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
              meaning="The driver changed the GPU's pending recovery action (e.g. to 'GPU Reset "
                      "Required' or 'Node Reboot Required') because of another Xid. "
                      "Informational: follow the guidance of the Xid that caused it."),
    106: dict(role="context", sub_domain="none", severity="info"),
    107: dict(role="context", sub_domain="none", severity="info"),
    171: dict(symptom="gpu_uncorrectable_dram_error", sub_domain="hardware", role="cascade",
              severity="error", category="gpu_memory", fallback_root=True),
    172: dict(symptom="gpu_uncorrectable_sram_error", sub_domain="hardware", role="cascade",
              severity="error", category="gpu_memory", fallback_root=True),
    167: dict(symptom="gpu_pcie_fatal_timeout", sub_domain="hardware", role="root",
              severity="critical", category="pcie"),
    168: dict(symptom="gpu_reduced_memory_capacity", sub_domain="hardware", role="root",
              severity="error", category="gpu_memory"),
    169: dict(symptom="gpu_sec2_halt", sub_domain="hardware", role="root", severity="critical",
              category="gpu_firmware"),
}
for _n in range(144, 151):
    OVERRIDES[_n].setdefault("sub_domain", "network")
    OVERRIDES[_n].setdefault("category", "nvlink")
    OVERRIDES[_n].setdefault("role", "root")
    OVERRIDES[_n].setdefault("severity", "critical")
for _n in range(162, 166):  # power smoothing circuitry, no NVIDIA action listed
    OVERRIDES[_n] = dict(sub_domain="hardware", role="context", severity="info",
                         category="gpu_power")
OVERRIDES[165].update(role="root", severity="warning")  # lifetime exhausted
# docs/taxonomy.md: auxiliary power not connected (CHECK_MECHANICALS) is a part; ALI link
# training is the NVLink fabric, as its SXid, NVRM and Fabric Manager twins are.
OVERRIDES[54] = dict(sub_domain="hardware")
OVERRIDES[136] = dict(sub_domain="network", category="nvlink")
OVERRIDES[162].update(role="root", severity="error")  # NVSentinel: RESET_GPU, FATAL
for _n in (166, 170):  # confidential-computing NVLink events
    OVERRIDES[_n] = dict(sub_domain="network", role="root", severity="error", category="nvlink")

IMMEDIATE_TEXT = {
    "RESTART_APP": "Restart the application; the GPU does not need a reset.",
    "RESET_GPU": "Drain the node and reset the GPU (nvidia-smi -r, or reboot) before reuse.",
    "RESTART_BM": "Drain the node and reboot it (bare-metal restart); the GPU cannot be "
                  "recovered in place.",
    "RESTART_VM": "Restart the VM.",
    "CONTACT_SUPPORT": "Unexpected on current drivers: keep the node out, collect "
                       "nvidia-bug-report.sh and contact NVIDIA support.",
    "IGNORE": "No immediate action; watch for recurrence on the same GPU.",
    "CHECK_MECHANICALS": "Check the GPU's auxiliary power cabling and seating.",
    "UPDATE_SWFW": "Update driver/firmware (vGPU manager and guest driver must be compatible).",
    "CHECK_UVM": "Check UVM (nvidia-uvm) state and the application's managed-memory use.",
    "WORKFLOW_XID_45": "Follow the other Xids on this GPU; if Xid 45 is alone, restart "
                       "nvidia-fabricmanager.",
    "WORKFLOW_XID_48": "Drain the node and reset the GPU so the failing row is remapped / page "
                       "retired; if Xid 64 follows or DBEs recur, replace the GPU.",
    "WORKFLOW_NVLINK_ERR": "Drain the node, reset the GPU(s) on the link; if the same link "
                           "fails again run NVLink diagnostics (dcgmi diag -r 3, nvidia-smi "
                           "nvlink -e) and replace the failing part.",
    "WORKFLOW_NVLINK5_ERR": "Drain the node/tray, follow NVIDIA's NVLink5 workflow: reset the "
                            "GPU(s), check the NVLink switch trays and cabling (nvidia-smi "
                            "nvlink -e, NMX/NVOS logs); replace the part if the link keeps "
                            "failing.",
    "XID_154": "Apply the recovery action it names (GPU reset or node reboot) and follow the "
               "guidance of the Xid that triggered it.",
}
INVESTIGATORY_TEXT = {
    "CHECK_APP/CUDA": "check the application and CUDA version",
    "WORKFLOW_XID_13": "rerun the application under compute-sanitizer; suspect the GPU only if "
                       "it recurs with other applications (dcgmi diag)",
    "WORKFLOW_XID_31": "rerun under compute-sanitizer to find the faulting access; suspect the "
                       "GPU only if it recurs with known-good applications",
    "CONTACT_SUPPORT": "collect nvidia-bug-report.sh and contact NVIDIA support if it recurs",
    "INVESTIGATE_SW": "investigate driver/firmware versions and known issues",
    "INVESTIGATE_SW_USER": "investigate the driver and the application's NVLink usage",
    "INVESTIGATE_LINK_SI": "investigate link signal integrity (cables, connectors, trays)",
    "XID_137_FLOW": "check the application's NVLink/FLA memory mappings",
    "SYMPATHETIC_REPORT_SOLO": "usually a sympathetic report of another error; report if alone",
    "IGNORE (sympathetic)": "usually sympathetic to another error on the node",
    "IGNORE": "no further investigation needed",
    "UPDATE_SWFW": "update driver/firmware",
}
CRITICAL_ACTIONS = {"RESET_GPU", "RESTART_BM", "RESTART_VM", "CHECK_MECHANICALS", "UPDATE_SWFW",
                    "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR"}


def q(s):
    """YAML single-quoted scalar."""
    return "'" + str(s).replace("'", "''") + "'"


def slug(s):
    s = re.sub(r"[^A-Za-z0-9]+", "_", s).strip("_").lower()
    return s


def causes_of(row):
    c = (row["legacy_potential_causes"] or "").strip()
    return [] if c in ("", "-") else c.split("+")


def decide(row):
    n = int(row["xid"])
    o = dict(OVERRIDES.get(n, {}))
    mnem = row["mnemonic"]
    imm = row["nvidia_immediate"].strip()
    sev_nvs = row["nvsentinel_severity"].strip()
    causes = causes_of(row)

    if "sub_domain" not in o:
        if mnem.startswith("NVLINK") or "_NVLINK_" in mnem:
            o["sub_domain"] = "network"
        elif mnem.startswith("C2C"):
            o["sub_domain"] = "hardware"
        elif "hw" in causes:
            o["sub_domain"] = "hardware"
        elif "user_app" in causes:
            o["sub_domain"] = "application" if imm == "RESTART_APP" else "system_software"
        elif causes:
            o["sub_domain"] = "system_software"
        elif imm in ("RESET_GPU", "RESTART_BM", "CONTACT_SUPPORT", "RESTART_APP"):
            o["sub_domain"] = "hardware"
        else:
            o["sub_domain"] = "system_software"
    if "role" not in o:
        if imm == "IGNORE" and row["nvsentinel_action"].strip() in ("IGNORE", ""):
            o["role"] = "context"
        else:
            o["role"] = "root"
    if "severity" not in o:
        if o["role"] == "context":
            o["severity"] = "info"
        elif sev_nvs == "FATAL" and imm in CRITICAL_ACTIONS:
            o["severity"] = "critical"
        elif sev_nvs == "FATAL" or imm == "RESTART_APP":
            o["severity"] = "error"
        else:
            o["severity"] = "warning"
    if "category" not in o:
        m = mnem.upper()
        if "NVLINK" in m:
            o["category"] = "nvlink"
        elif any(k in m for k in ("ECC", "DRAM", "INFOROM_DRAM", "RETIREMENT_EVENT",
                                  "RETIREMENT_FAILURE", "FB_MEMORY", "SBE")):
            o["category"] = "gpu_memory"
        elif any(k in m for k in ("PMU", "GSP", "FECS", "SEC2", "SEC_", "SPI_", "INFOROM")):
            o["category"] = "gpu_firmware"
        elif any(k in m for k in ("DISP", "HEAD_", "CURSOR", "WINDOW_CHANNEL", "CORE_CHANNEL",
                                  "DP_LT", "VGA", "BUNDLE", "VBLANK", "SCANLINE")):
            o["category"] = "gpu_display"
        elif "PSHC" in m or "PWR" in m:
            o["category"] = "gpu_power"
        elif "VGPU" in m:
            o["category"] = "vgpu"
        else:
            o["category"] = "gpu"
    if "symptom" not in o:
        base = re.sub(r"^(ROBUST_CHANNEL_|SILENT_RUNNING_)", "", mnem.split(" / ")[0])
        sym = slug(base)
        if not sym.startswith(("gpu_", "nvlink", "gsp", "c2c")):
            sym = "gpu_" + sym
        o["symptom"] = sym
    return o


def meaning_of(row, o):
    if "meaning" in o:
        text = o["meaning"]
    else:
        desc = row["description"].strip()
        legacy = row["legacy_name"].strip()
        if desc == "Unused":
            text = (f"NVIDIA lists Xid {row['xid']} ({row['mnemonic']}) as unused by current "
                    "drivers")
            if legacy and legacy not in ("Unused", "Reserved"):
                text += f"; older drivers used it for: {legacy}"
            text += ". Seeing it means an old driver or an unexpected driver path."
        else:
            text = f"{desc} ({row['mnemonic']})."
            if legacy and legacy not in ("Unused", "Reserved", desc) and \
                    not legacy.startswith(desc):
                text += f" Legacy description: {legacy}."
    causes = causes_of(row)
    if causes:
        text += " Potential causes per NVIDIA: " + ", ".join(causes) + "."
    sev = row["nvsentinel_severity"].strip()
    if sev:
        text += f" NVSentinel treats it as {sev}."
    return text


def action_of(row):
    imm = row["nvidia_immediate"].strip()
    inv = row["nvidia_investigatory"].strip()
    parts = []
    if imm:
        parts.append(IMMEDIATE_TEXT.get(imm, f"NVIDIA immediate action: {imm}."))
    else:
        parts.append("NVIDIA's catalog gives no action yet: keep the node under watch and "
                     "collect nvidia-bug-report.sh if it recurs.")
    if inv and inv != imm and not inv.startswith("N/A") and not inv.startswith("Solo"):
        t = INVESTIGATORY_TEXT.get(inv, inv)
        parts.append(f"Then {t}.")
    tag = [f"immediate={imm or '-'}"]
    if inv:
        tag.append(f"investigatory={inv}")
    parts.append(f"(NVIDIA: {', '.join(tag)})")
    return " ".join(parts)


def examples_of(n, o):
    detail = o.get("detail", "Ch 0000000a")
    ex = [
        f"NVRM: Xid (PCI:0000:3b:00): {n}, pid=1234, name=python, {detail}",
        f"NVRM: Xid (PCI:0000:3b:00): {n}, {detail}",
        f"NVRM: Xid (PCI:0000:3b:00): {n}, pid='<unknown>', name=<unknown>, {detail}",
        f"NVRM: Xid (PCI:0000:b7:00): {n}, pid=<unknown>, name=<unknown>, Ch 0000000a, {detail}",
        f"NVRM: Xid (PCI:0000:3b:00 GPU-I:05): {n}, pid=4321, name=pt_main_thread, {detail}",
        f"NVRM: Xid (0000:3b:00): {n}, {detail}",
        f"NVRM: Xid (PCI:00000000:3b:00.0): {n}, pid=98765, name=python3, {detail}",
    ]
    if n in (43, 45, 145, 154):
        prev = 149 if n == 145 else 79
        ex.append(f"NVRM: Xid (PCI:0000:3b:00): {n}, pid=1234, name=python, Ch 00000010 "
                  f"(caused by previous Xid {prev})")
        # 570+ (open-gpu-kernel-modules kernel_rc.c): no parentheses.
        ex.append(f"NVRM: Xid (PCI:0000:dc:00): {n}, pid=1234, name=python, Ch 00000001 "
                  f"caused by previous Xid {prev}")
    other = 45 if n == 43 else 43
    neighbour = n + 1 if n < 172 else n - 1
    no = [
        f"NVRM: Xid (PCI:0000:3b:00): {neighbour}, pid=1234, name=python, Ch 0000000a",
        f"NVRM: Xid (PCI:0000:3b:00): {n}0, pid=1234, name=python, Ch 0000000a",
        f"NVRM: Xid (PCI:0000:3b:00): 1{n}, Ch 0000000a",
        f"NVRM: Xid (PCI:0000:3b:00): {other}, pid=1234, name=python, Ch 00000010 "
        f"(caused by previous Xid {n})",
        f"NVRM: GPU at PCI:0000:3b:00: GPU-5c2b7a1e-0d4f-3a5b-9c1e-2f3a4b5c6d7e",
    ]
    if n > 9:
        no.append(f"NVRM: Xid (PCI:0000:3b:00): {str(n)[:-1]}, Ch 0000000a")
    return ex, no


def main(argv):
    cat = argv[1] if len(argv) > 1 else None
    if cat is None:
        for c in (os.path.join(ROOT, "..", "shared", "reference", "xid_catalog.tsv"),
                  "/work/shared/reference/xid_catalog.tsv"):
            if os.path.exists(c):
                cat = c
                break
    out = argv[2] if len(argv) > 2 else os.path.join(ROOT, "rules", "nvidia", "xid.yaml")
    with open(cat, encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t") if r["xid"].strip().isdigit()]
    rows.sort(key=lambda r: int(r["xid"]))

    L = []
    w = L.append
    w("# GENERATED by scripts/gen-xid-rules.py from xid_catalog.tsv -- do not edit by hand.")
    w("# Mapping of NVIDIA's catalog to sub_domain/role/severity: see the script's docstring.")
    w("pack: nvidia-xid")
    w("description: NVIDIA driver Xid errors from the kernel log (NVRM), one rule per Xid in "
      "NVIDIA's catalog")
    w("defines:")
    w(f"  XID_HEAD: {q(XID_HEAD)}")
    w(f"  XID_TAIL: {q(XID_TAIL)}")
    w("rules:")
    for row in rows:
        n = int(row["xid"])
        o = decide(row)
        desc = row["description"].strip()
        label = desc if desc != "Unused" else row["mnemonic"].split(" / ")[0]
        w(f"  - id: xid.{n}")
        w(f"    since: {SINCE}")
        w(f"    symptom: {o['symptom']}")
        w(f"    sub_domain: {o['sub_domain']}")
        w(f"    category: {o['category']}")
        w(f"    role: {o['role']}")
        if o.get("fallback_root"):
            w("    fallback_root: true")
        w(f"    severity: {o['severity']}")
        w("    priority: 50")
        w("    prefilter: 'NVRM: Xid'")
        w(f"    pattern: '{{{{XID_HEAD}}}}(?P<xid>{n}){{{{XID_TAIL}}}}'")
        w("    device: '{pci}'")
        w(f"    fields: {{xid_name: {q(row['mnemonic'].split(' / ')[0])}}}")
        w(f"    summary: {q('GPU {pci}: Xid ' + str(n) + ' ' + label)}")
        w(f"    meaning: {q(meaning_of(row, o))}")
        w(f"    action: {q(action_of(row))}")
        w("    nvidia:")
        w(f"      immediate: {q(row['nvidia_immediate'].strip())}")
        w(f"      investigatory: {q(row['nvidia_investigatory'].strip())}")
        w(f"      nvsentinel_action: {q(row['nvsentinel_action'].strip())}")
        w(f"      nvsentinel_severity: {q(row['nvsentinel_severity'].strip())}")
        w(f"      causes: [{', '.join(q(c) for c in causes_of(row))}]")
        ex, no = examples_of(n, o)
        w("    examples:")
        w("      match:")
        for e in ex:
            w(f"        - {q(e)}")
        w("      no_match:")
        for e in no:
            w(f"        - {q(e)}")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(L) + "\n")
    print(f"gen-xid-rules: wrote {len(rows)} rules to {out}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
