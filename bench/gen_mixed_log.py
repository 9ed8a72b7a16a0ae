#!/usr/bin/env python3
"""Generate a large, realistic, deterministic mixed log for benchmarking faultline.

The output is a journal export in `journalctl -o short-iso-precise` format, as collected from a
GPU cluster (many hosts interleaved):

    2024-06-01T10:00:01.123456+00:00 gpu-a01 slurmd[2211]: launch task StepId=...

Most lines are benign (systemd, sshd, kernel, slurmd, NCCL INFO, training progress,
nvidia-persistenced, chronyd, cron, containerd, ...). About 2.5% of the lines carry something the
shipped rules match (NVRM Xid variants, NCCL WARN IB completion errors, ncclRemoteError, NCCL
watchdog timeouts, mlx5 link down, OOM killer, AER, EDAC, Slurm CANCELLED, ...). A few entries are
multi-line Python tracebacks printed the way journalctl prints multi-line messages (continuation
lines indented to the message column), so the parser's record joining is exercised too.

Speed: a pool of a few thousand distinct entries (varying numbers, hosts, pids, PCI ids) is
built once from a fixed seed; the file is then written in big chunks of entries sampled from the
pool, each prefixed with a monotonically increasing time stamp. Nothing but one chunk is ever held
in memory. The file is exactly SIZE bytes (the last line is a padding line of the right length).

Usage: gen_mixed_log.py OUT [SIZE_BYTES] [--seed N] [--meta FILE]
Prints one summary line; with --meta, also writes key=value facts (bytes, lines, ...) to FILE.
"""
import argparse
import calendar
import hashlib
import operator
import os
import random
import sys
import time

MATCH_FRACTION = 0.025      # share of pool entries that carry a rule match
POOL_BENIGN = 30000         # distinct benign entries
BLOCK_LINES = 512           # entries sharing one time-stamp second
CHUNK_BLOCKS = 16           # blocks per write (~ 1 MB per write)
START = calendar.timegm((2024, 6, 1, 10, 0, 0, 0, 0, 0))
TS_LEN = len("2024-06-01T10:00:01.123456+00:00 ")

HOSTS = [f"gpu-{r}{n:02d}" for r in "ab" for n in range(1, 17)]
USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "svc-train", "svc-eval"]
GPU_PCI = ["0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00", "0000:9a:00", "0000:ab:00",
           "0000:ba:00", "0000:db:00"]
HCA_PCI = ["0000:0c:00.0", "0000:1b:00.0", "0000:4c:00.0", "0000:5b:00.0", "0000:8c:00.0",
           "0000:9b:00.0", "0000:cc:00.0", "0000:db:00.1"]
OPS = ["ALLREDUCE", "ALLGATHER", "_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE", "BROADCAST"]


def benign(r):
    """One benign entry: (host, ident, message)."""
    h = r.choice(HOSTS)
    pid = r.randint(300, 4_000_000)
    u = r.choice(USERS)
    ip = f"10.{r.randint(0, 3)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
    port = r.randint(1024, 65535)
    job = r.randint(7_000_000, 7_999_999)
    rank = r.randint(0, 7)
    tid = pid + r.randint(1, 200)
    k = r.randrange(44)
    if k == 0:
        return h, "systemd[1]", f"Started Session {r.randint(1, 99999)} of User {u}."
    if k == 1:
        return h, "systemd[1]", r.choice([
            "Starting Daily apt download activities...", "apt-daily.service: Deactivated successfully.",
            "Finished Daily Cleanup of Temporary Directories.", "Started Run anacron jobs.",
            "Starting Cleanup of Temporary Directories...", "logrotate.service: Deactivated successfully.",
            "Finished Rotate log files.", "Reached target Timer Units.", "Started Discard unused blocks once a week."])
    if k == 2:
        return h, "systemd[1]", f"session-{r.randint(1, 99999)}.scope: Deactivated successfully."
    if k == 3:
        return h, "systemd[1]", f"Created slice User Slice of UID {r.randint(1000, 1100)}."
    if k == 4:
        s = r.randint(1, 99999)
        return h, f"systemd-logind[{r.randint(700, 1500)}]", r.choice([
            f"New session {s} of user {u}.", f"Session {s} logged out. Waiting for processes to exit.",
            f"Removed session {s}."])
    if k == 5:
        fp = "".join(r.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
                     for _ in range(43))
        return h, f"sshd[{pid}]", f"Accepted publickey for {u} from {ip} port {port} ssh2: ED25519 SHA256:{fp}"
    if k == 6:
        return h, f"sshd[{pid}]", r.choice([
            f"pam_unix(sshd:session): session opened for user {u}(uid={r.randint(1000, 1100)}) by (uid=0)",
            f"pam_unix(sshd:session): session closed for user {u}",
            f"Received disconnect from {ip} port {port}:11: disconnected by user",
            f"Disconnected from user {u} {ip} port {port}"])
    if k == 7:
        return h, "kernel", (f"audit: type=1400 audit({START + r.randint(0, 90000)}.{r.randint(0, 999):03d}:"
                             f"{r.randint(100, 99999)}): apparmor=\"STATUS\" operation=\"profile_replace\" "
                             f"profile=\"unconfined\" name=\"docker-default\" pid={pid} comm=\"apparmor_parser\"")
    if k == 8:
        return h, "kernel", r.choice([
            f"perf: interrupt took too long ({r.randint(2501, 9000)} > 2500), lowering kernel.perf_event_max_sample_rate to {r.randint(20000, 79750)}",
            f"docker0: port {r.randint(1, 9)}(veth{r.randint(0, 0xffffff):06x}) entered forwarding state",
            f"docker0: port {r.randint(1, 9)}(veth{r.randint(0, 0xffffff):06x}) entered disabled state",
            f"nvme nvme{r.randint(0, 3)}: {r.choice([32, 64, 128])}/0/0 default/read/poll queues",
            f"EXT4-fs (nvme0n1p{r.randint(1, 4)}): mounted filesystem with ordered data mode. Quota mode: none.",
            "nvidia-nvlink: Nvlink Core is being initialized, major device number 234",
            f"mlx5_core {r.choice(HCA_PCI)}: E-Switch: Total vports 2, per vport: max uc(128) max mc(2048)",
            f"IPv4: martian source {ip} from 10.0.0.{r.randint(1, 254)}, on dev ib{r.randint(0, 7)}"])
    if k == 9:
        return h, "kernel", (f"NVRM: GPU at PCI:{r.choice(GPU_PCI)}: GPU-{r.getrandbits(32):08x}-"
                             f"{r.getrandbits(16):04x}-{r.getrandbits(16):04x}-{r.getrandbits(16):04x}-{r.getrandbits(48):012x}")
    if k == 10:
        return h, f"slurmd[{r.randint(2000, 3000)}]", (
            f"launch task StepId={job}.{r.randint(0, 9)} request from UID:{r.randint(1000, 1100)} "
            f"GID:{r.randint(1000, 1100)} HOST:{ip} PORT:{port}")
    if k == 11:
        return h, f"slurmd[{r.randint(2000, 3000)}]", r.choice([
            f"Launching batch job {job} for UID {r.randint(1000, 1100)}",
            f"job {job} completed with slurm_rc = 0, job_rc = 0",
            f"task/affinity: task_p_slurmd_batch_request: task_p_slurmd_batch_request: {job}",
            f"task/affinity: batch_bind: job {job} CPU input mask for node: 0xFFFFFFFFFFFFFFFF",
            f"_run_prolog: prolog with lock for job {job} ran for {r.randint(0, 9)} seconds",
            f"credential for job {job} revoked"])
    if k == 12:
        return h, f"slurmstepd[{pid}]", r.choice([
            "done with job", f"Sent signal 18 to StepId={job}.{r.randint(0, 9)}",
            f"task_p_pre_launch: Using sched_affinity for tasks",
            f"cgroup/v2: _get_cont_mem_limit: memory.max set to {r.randint(100, 2000)}G"])
    if 13 <= k <= 20:
        # NCCL INFO from the training processes (the bulk of a busy GPU node's journal).
        pre = f"{h}:{pid}:{tid} [{rank}] NCCL INFO "
        hca = r.randint(0, 7)
        msg = r.choice([
            f"Channel {r.randint(0, 31):02d}/32 :    0   1   2   3   4   5   6   7",
            f"Channel {r.randint(0, 31):02d}/0 : {rank}[{rank}] -> {(rank + 1) % 8}[{(rank + 1) % 8}] via P2P/IPC/read",
            f"Channel {r.randint(0, 31):02d}/0 : {r.randint(0, 63)}[{rank}] -> {r.randint(0, 63)}[{rank}] [send] via NET/IB/{hca}/GDRDMA",
            f"NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB [2]mlx5_4:1/IB [3]mlx5_5:1/IB ; OOB ib0:{ip}<0>",
            f"comm 0x{r.getrandbits(44):x} rank {r.randint(0, 63)} nranks 64 cudaDev {rank} nvmlDev {rank} busId {r.choice(GPU_PCI)[5:7]}000 commId 0x{r.getrandbits(64):x} - Init COMPLETE",
            "Using network IB", f"cudaDriverVersion {r.choice([12020, 12040, 12050])}",
            f"Bootstrap : Using ib0:{ip}<0>", "Connected all rings", "Connected all trees",
            f"threadThresholds 8/8/64 | 512/8/64 | 512 | 512",
            f"{r.choice([16, 24, 32])} coll channels, 0 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
            f"NCCL_IB_GID_INDEX set by environment to 3.",
            f"Setting affinity for GPU {rank} to ffff,ffffffff,00000000,0000ffff,ffffffff"])
        return h, f"python[{pid}]", pre + msg
    if 21 <= k <= 30:
        # Training progress.
        step = r.randint(1, 400000)
        msg = r.choice([
            f"[rank{r.randint(0, 63)}]: step {step}/400000 | loss {r.uniform(1.5, 4):.4f} | lr {r.uniform(1e-5, 3e-4):.2e} | grad_norm {r.uniform(0.1, 3):.3f} | tokens/s {r.randint(80000, 160000)} | mfu {r.uniform(30, 55):.1f}%",
            f" iteration {step:8d}/  400000 | consumed samples: {step * 1024:12d} | elapsed time per iteration (ms): {r.uniform(900, 1600):.1f} | learning rate: {r.uniform(1e-5, 3e-4):.3E} | global batch size:  1024 | lm loss: {r.uniform(1.5, 4):.6E} | loss scale: 1.0 | grad norm: {r.uniform(0.1, 3):.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |".lstrip(),
            f"[INFO] Epoch {r.randint(0, 20)} [{r.randint(0, 5000)}/5000] loss={r.uniform(1.5, 4):.3f} acc={r.uniform(0.3, 0.9):.3f} throughput={r.uniform(200, 900):.1f} samples/s",
            f"Saving checkpoint to /lustre/ckpt/{u}/run{r.randint(1, 99)}/step_{step}",
            f"[rank{r.randint(0, 63)}]: validation at step {step}: val_loss={r.uniform(1.5, 4):.4f} ppl={r.uniform(4, 60):.2f}",
            f"[rank{r.randint(0, 63)}]: data loader: prefetched {r.randint(1, 64)} batches, queue depth {r.randint(0, 16)}"])
        return h, f"python[{pid}]", msg
    if k == 31:
        return h, f"nvidia-persistenced[{r.randint(1500, 2500)}]", r.choice([
            f"Started ({r.randint(1500, 2500)})", f"device {r.choice(GPU_PCI)}.0 - registered",
            "Verbose syslog connection opened", "PID file unlocked.", "Local RPC services initialized",
            f"device {r.choice(GPU_PCI)}.0 - persistence mode enabled.",
            f"device {r.choice(GPU_PCI)}.0 - NUMA memory onlined."])
    if k == 32:
        return h, f"chronyd[{r.randint(800, 1200)}]", r.choice([
            f"Selected source 10.0.0.{r.randint(250, 254)} (ntp{r.randint(1, 3)}.cluster)",
            f"System clock wrong by {r.uniform(-0.01, 0.01):.6f} seconds",
            f"Source 10.0.0.{r.randint(250, 254)} replaced with 10.0.1.{r.randint(250, 254)}"])
    if k == 33:
        return h, f"CRON[{pid}]", r.choice([
            "(root) CMD (   cd / && run-parts --report /etc/cron.hourly)",
            f"pam_unix(cron:session): session opened for user root(uid=0) by (uid=0)",
            "pam_unix(cron:session): session closed for user root",
            "(root) CMD (/usr/local/sbin/gpu-health-check --quiet)"])
    if k == 34:
        return h, f"containerd[{r.randint(1000, 1900)}]", (
            f"time=\"2024-06-01T{r.randint(10, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999999999):09d}Z\" "
            f"level=info msg=\"{r.choice(['loading plugin', 'starting signal loop', 'shim disconnected', 'cleaning up dead shim'])}\" "
            f"id={r.getrandbits(64):016x}{r.getrandbits(64):016x} namespace=moby")
    if k == 35:
        return h, f"node_exporter[{r.randint(1000, 1900)}]", (
            f"ts=2024-06-01T{r.randint(10, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999):03d}Z "
            f"caller=collector.go:{r.randint(100, 300)} level=info collector={r.choice(['hwmon', 'infiniband', 'netdev', 'nvme', 'textfile'])} "
            f"msg=\"collector succeeded\" duration_seconds={r.uniform(0, 0.2):.6f}")
    if k == 36:
        return h, f"nv-hostengine[{r.randint(1000, 1900)}]", (
            f"DCGM: field group {r.randint(1, 40)} updated, {r.randint(1, 120)} fields watched on {r.randint(1, 8)} GPUs, "
            f"update interval {r.choice([1000000, 5000000, 30000000])} us")
    if k == 37:
        return h, f"rsyslogd[{r.randint(700, 1000)}]", r.choice([
            "[origin software=\"rsyslogd\" swVersion=\"8.2112.0\" x-pid=\"912\" x-info=\"https://www.rsyslog.com\"] rsyslogd was HUPed",
            f"imjournal: {r.randint(1, 9999)} messages lost due to rate-limiting (20000 allowed within 600 seconds)"])
    if k == 38:
        return h, f"systemd-networkd[{r.randint(600, 900)}]", r.choice([
            f"ib{r.randint(0, 7)}: Gained IPv6LL", f"veth{r.getrandbits(24):06x}: Link UP",
            f"eno{r.randint(1, 2)}: DHCPv4 address {ip}/16, gateway 10.0.0.1 acquired from 10.0.0.2"])
    if k == 39:
        return h, f"dockerd[{r.randint(1000, 1900)}]", (
            f"time=\"2024-06-01T{r.randint(10, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999999999):09d}Z\" "
            f"level=info msg=\"ignoring event\" container={r.getrandbits(64):016x} module=libcontainerd namespace=moby topic=/tasks/delete type=\"*events.TaskDelete\"")
    if k == 40:
        return h, f"slurmctld[{r.randint(2000, 3000)}]", r.choice([
            f"sched: Allocate JobId={job} NodeList={h},gpu-b{r.randint(1, 16):02d} #CPUs=224 Partition=gpu",
            f"_job_complete: JobId={job} WEXITSTATUS 0", f"_job_complete: JobId={job} done",
            f"Node {h} now responding",
            f"_slurm_rpc_submit_batch_job: JobId={job} InitPrio={r.randint(1000, 99999)} usec={r.randint(100, 9999)}"])
    if k == 41:
        return h, f"python[{pid}]", f"{h}:{pid}:{tid} [{rank}] NCCL INFO [Service thread] Connection closed by localRank {r.randint(0, 7)}"
    if k == 42:
        return h, "kernel", f"EDAC MC{r.randint(0, 3)}: {r.randint(1, 3)} CE memory read error on CPU_SrcID#{r.randint(0, 1)}_MC#{r.randint(0, 3)}_Chan#{r.randint(0, 7)}_DIMM#0 (channel:{r.randint(0, 7)} slot:0 page:0x{r.getrandbits(20):x} offset:0x0 grain:32 syndrome:0x0)"
    return h, f"python[{pid}]", f"[rank{rank}]: wandb: logged {r.randint(1, 99)} metrics at step {r.randint(1, 400000)}"


def matching(r):
    """One entry carrying a rule match: (host, ident, message)."""
    h = r.choice(HOSTS)
    pid = r.randint(300, 4_000_000)
    tid = pid + r.randint(1, 200)
    rank = r.randint(0, 7)
    grank = r.randint(0, 63)
    gpu = r.choice(GPU_PCI)
    hca = r.choice(HCA_PCI)
    job = r.randint(7_000_000, 7_999_999)
    ip = f"10.{r.randint(0, 3)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
    pn = r.choice(["pid='<unknown>', name=<unknown>", f"pid={pid}, name=python", f"pid={pid}, name=pt_main_thread"])
    k = r.randrange(26)
    if k <= 7:
        xid = r.choice([13, 31, 43, 45, 48, 63, 64, 74, 79, 92, 94, 95, 119, 154])
        detail = {
            13: f"Graphics SM Warp Exception on (GPC {r.randint(0, 7)}, TPC {r.randint(0, 8)}, SM {r.randint(0, 1)}): Out Of Range Address",
            31: f"Ch {r.getrandbits(32):08x}, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_{r.randint(0, 7)} faulted @ 0x7f{r.getrandbits(8):02x}_{r.getrandbits(32):08x}. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
            43: f"Ch {r.getrandbits(32):08x}",
            45: f"Ch {r.getrandbits(32):08x}",
            48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 2, subpartition 0.",
            63: f"Row Remapper: New row (0x{r.getrandbits(40):016x}) was marked for remapping, reset gpu to activate.",
            64: f"Row Remapper: Failed to remap row (0x{r.getrandbits(40):016x})",
            74: f"NVLink: fatal error detected on link {r.randint(0, 17)}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
            79: "GPU has fallen off the bus.",
            92: "High single-bit ECC error rate",
            94: f"Contained: SM (0x{r.randint(1, 8):x}). RST: No, D-RST: No",
            95: f"Uncontained: FBHUB. RST: Yes, D-RST: No",
            119: f"Timeout after 6s of waiting for RPC response from GPU{rank} GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
            154: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
        }[xid]
        if xid in (79, 154, 92):
            return h, "kernel", f"NVRM: Xid (PCI:{gpu}): {xid}, {detail}"
        return h, "kernel", f"NVRM: Xid (PCI:{gpu}): {xid}, {pn}, {detail}"
    if k == 8:
        return h, f"python[{pid}]", (
            f"{h}:{pid}:{tid} [{rank}] NCCL WARN NET/IB : Got completion from peer {ip}<{r.randint(1024, 65535)}> "
            f"with status={r.choice([5, 12, 13])} opcode={r.choice([0, 1, 129])} len=0 vendor err {r.choice([129, 244, 249])} (Recv) "
            f"localGid ::ffff:10.0.0.{r.randint(1, 254)} remoteGids::ffff:{ip} hca mlx5_{r.randint(0, 7)}")
    if k == 9:
        return h, f"python[{pid}]", f"{h}:{pid}:{tid} [{rank}] NCCL WARN NET/IB : Got completion with error {r.choice([5, 12])}, opcode {r.randint(0, 1)}, len 0, vendor err {r.choice([129, 244])}"
    if k == 10:
        return h, f"python[{pid}]", r.choice([
            f"ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
            f"[rank{grank}]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:{r.randint(1200, 2100)}, remote process exited or there was a network error, NCCL version 2.{r.randint(18, 21)}.{r.randint(1, 5)}"])
    if k == 11:
        seq = r.randint(1, 999999)
        t = r.choice([600000, 1800000])
        return h, f"python[{pid}]", (
            f"[rank{grank}]:[E{r.randint(1001, 1031)} {r.randint(10, 23)}:{r.randint(10, 59)}:{r.randint(10, 59)}.{r.randint(0, 999999999):09d} ProcessGroupNCCL.cpp:616] "
            f"[PG 0 (default_pg) Rank {grank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={r.choice(OPS)}, "
            f"NumelIn={r.randint(1, 1 << 26)}, NumelOut={r.randint(1, 1 << 26)}, Timeout(ms)={t}) ran for {t + r.randint(1, 999)} milliseconds before timing out.")
    if k == 12:
        return h, f"python[{pid}]", f"[rank{grank}]:[E ProcessGroupNCCL.cpp:583] [Rank {grank}] To avoid data inconsistency, we are taking the entire process down."
    if k == 13:
        return h, "kernel", r.choice([f"mlx5_core {hca} ib{r.randint(0, 7)}: Link down",
                                      f"mlx5_core {hca}: mlx5_port_module_event:1094:(pid 0): Port module event: module {r.randint(0, 7)}, Cable unplugged"])
    if k == 14:
        kb = r.randint(10**8, 10**9)
        return h, "kernel", r.choice([
            f"Out of memory: Killed process {pid} (python) total-vm:{kb}kB, anon-rss:{kb - r.randint(1, 10**7)}kB, file-rss:0kB, shmem-rss:0kB, UID:{r.randint(1000, 1100)} pgtables:{r.randint(10000, 900000)}kB oom_score_adj:0",
            f"{r.choice(['python', 'pt_data_worker', 'pt_main_thread'])} invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0"])
    if k == 15:
        return h, "kernel", r.choice([
            f"pcieport 0000:{r.choice(['00', '16', '5c', '98'])}:0{r.randint(1, 3)}.{r.randint(0, 3)}: AER: Corrected error received: {gpu}.0",
            f"pcieport 0000:{r.choice(['00', '16', '5c', '98'])}:0{r.randint(1, 3)}.{r.randint(0, 3)}: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
            f"pcieport 0000:{r.choice(['00', '16', '5c', '98'])}:0{r.randint(1, 3)}.{r.randint(0, 3)}: AER: Uncorrected (Non-Fatal) error received: {gpu}.0",
            f"pcieport 0000:{r.choice(['00', '16', '5c', '98'])}:0{r.randint(1, 3)}.{r.randint(0, 3)}: AER: Uncorrected (Fatal) error received: {gpu}.0"])
    if k == 16:
        return h, "kernel", (f"EDAC MC{r.randint(0, 3)}: 1 UE memory read error on CPU_SrcID#{r.randint(0, 1)}_MC#{r.randint(0, 3)}_Chan#{r.randint(0, 7)}_DIMM#0 "
                             f"(channel:{r.randint(0, 7)} slot:0 page:0x{r.getrandbits(20):x} offset:0x0 grain:32 -  err_code:0x0000:0x009f)")
    if k == 17:
        why = r.choice(["DUE TO TIME LIMIT ", "DUE TO PREEMPTION ", "", "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS "])
        what = r.choice([f"JOB {job}", f"STEP {job}.{r.randint(0, 9)}"])
        return h, f"slurmstepd[{pid}]", f"error: *** {what} ON {h} CANCELLED AT 2024-06-01T{r.randint(10, 23)}:{r.randint(10, 59)}:{r.randint(10, 59)} {why}***"
    if k == 18:
        return h, "kernel", f"watchdog: BUG: soft lockup - CPU#{r.randint(0, 223)} stuck for {r.randint(21, 60)}s! [python:{pid}]"
    if k == 19:
        return h, "kernel", f"INFO: task {r.choice(['python', 'pt_data_worker', 'jbd2/nvme0n1p1-8'])}:{pid} blocked for more than {r.choice([120, 241, 362])} seconds."
    if k == 20:
        return h, "kernel", f"nfs: server nfs0{r.randint(1, 4)} not responding, still trying"
    if k == 21:
        return h, "kernel", (f"nvidia-nvswitch{r.randint(0, 3)}: SXid (PCI:0000:{r.choice(['05', '06', '86', '87'])}:00.0): "
                             f"{r.choice([12028, 19049])}, Non-fatal, Link {r.randint(0, 63)} egress non-posted PRIV error (First)")
    if k == 22:
        return h, f"slurmctld[{r.randint(2000, 3000)}]", r.choice([
            f"error: Nodes {h} not responding", f"Killing JobId={job} on failed node {h}",
            f"validate_node_specs: Node {h} unexpectedly rebooted boot_time={START + r.randint(0, 90000)} last response={START + r.randint(0, 90000)}"])
    if k == 23:
        return h, f"slurmstepd[{pid}]", f"error: Detected {r.randint(1, 4)} oom_kill event in StepId={job}.{r.randint(0, 9)}. Some of the step tasks have been OOM Killed."
    if k == 24:
        return h, "kernel", f"LustreError: 11-0: lustre-OST{r.randint(0, 31):04x}-osc-ffff{r.getrandbits(44):012x}: operation ost_read to node 10.0.0.{r.randint(1, 30)}@o2ib failed: rc = -107"
    return h, "kernel", f"python[{pid}]: segfault at 0 ip 00007f{r.getrandbits(40):010x} sp 00007ffd{r.getrandbits(32):08x} error 4 in libnccl.so.2[7f{r.getrandbits(40):010x}+{r.getrandbits(24):x}]"


def traceback(r):
    """A multi-line Python traceback as journalctl prints it: (host, ident, [lines])."""
    h = r.choice(HOSTS)
    pid = r.randint(300, 4_000_000)
    err = r.choice([
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {r.randint(2, 900)}.00 MiB. GPU {r.randint(0, 7)} has a total capacity of 79.15 GiB of which 3.06 MiB is free.",
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        f"KeyError: 'input_ids_{r.randint(0, 99)}'"])
    return h, f"python[{pid}]", [
        "Traceback (most recent call last):",
        f"  File \"/opt/train/train.py\", line {r.randint(100, 900)}, in <module>",
        "    main()",
        f"  File \"/opt/train/train.py\", line {r.randint(100, 900)}, in train_step",
        "    loss.backward()",
        err]


def kernel_trace(r):
    """A soft-lockup report with its call trace, as raw dmesg prints it (continuation lines)."""
    h = r.choice(HOSTS)
    return h, "kernel", [
        f"watchdog: BUG: soft lockup - CPU#{r.randint(0, 223)} stuck for {r.randint(21, 60)}s! [python:{r.randint(300, 4_000_000)}]",
        " Call Trace:",
        "  <TASK>",
        f"  _raw_spin_lock+0x{r.getrandbits(8):x}/0x30",
        f"  os_acquire_spinlock+0x{r.getrandbits(8):x}/0x30 [nvidia]",
        "  </TASK>"]


def is_app(ident):
    return ident.startswith("python[")


def build_pool(seed, fmt="journal"):
    """Pool entries, each its lines' text after the per-line prefix the writer adds:
    journal: " host ident: msg" (continuation lines indented to the message column);
    dmesg:   " msg", kernel messages only (call traces as unstamped continuation lines);
    ranks:   "R: msg", what the job's python ranks print under srun --label (NCCL, PyTorch)."""
    r = random.Random(seed)
    keep = {"journal": lambda ident: True, "dmesg": lambda ident: ident == "kernel", "ranks": is_app}[fmt]

    def entry(h, ident, lines):
        if fmt == "journal":
            head = f" {h} {ident}: "
            indent = " " * (TS_LEN - 1 + len(head))
            return head + lines[0] + "\n" + "".join(indent + l + "\n" for l in lines[1:])
        if fmt == "dmesg":
            return "".join((" " if i == 0 else "") + l + "\n" for i, l in enumerate(lines))
        rank = r.randint(0, 63)
        return "".join(f"{rank}: {l}\n" for l in lines)

    entries = []
    while len(entries) < POOL_BENIGN:
        h, ident, msg = benign(r)
        # Corrected-ECC reports are one of the journal's 44 benign kinds but one of the kernel's
        # few: in dmesg keep them at the journal's share, or ~20 % of its lines would match a rule.
        if fmt == "dmesg" and " CE memory read error" in msg and r.randrange(8):
            continue
        if keep(ident):
            entries.append(entry(h, ident, [msg]))
    n_match = round(POOL_BENIGN * MATCH_FRACTION / (1 - MATCH_FRACTION))
    made = 0
    i = 0
    while made < n_match:
        i += 1
        if i % 40 == 0 and fmt != "dmesg":
            h, ident, lines = traceback(r)
        elif i % 40 == 0:
            h, ident, lines = kernel_trace(r)
        else:
            h, ident, msg = matching(r)
            lines = [msg]
        if keep(ident):
            entries.append(entry(h, ident, lines))
            made += 1
    r.shuffle(entries)
    return entries


def continuation(chunk, at, fmt):
    """Is the line starting at chunk[at] a continuation line of the entry before it?"""
    if fmt == "ranks":  # a traceback: "R:   File ..." / "R: ErrorType: ..." after "R: Traceback"
        line = chunk[at:chunk.find(b"\n", at)]
        _, _, rest = line.partition(b": ")
        return rest.startswith(b" ") or (b"Error" in rest.split(b" ")[0] and not rest.startswith(b"["))
    return chunk[at:at + 1] == b" "


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("size", nargs="?", type=int, default=1 << 30, help="exact output size in bytes")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--meta", help="write key=value facts about the file here")
    ap.add_argument("--format", choices=["journal", "dmesg", "ranks"], default="journal",
                    help="journal: journalctl -o short-iso-precise of many hosts (default); dmesg: raw "
                         "dmesg of one node; ranks: a job's srun --label rank output (NCCL, PyTorch)")
    a = ap.parse_args()
    if a.size < 4096:
        sys.exit("size must be at least 4096 bytes")

    t0 = time.perf_counter()
    r = random.Random(a.seed ^ 0x5EED)
    pool = build_pool(a.seed, a.format)
    # Sorted sub-second parts, a few variants so consecutive seconds differ.
    fracs = []
    for _ in range(8):
        us = sorted(r.sample(range(1_000_000), BLOCK_LINES))
        fracs.append([f".{u:06d}+00:00" for u in us])

    tmp = a.out + ".tmp"
    written = 0
    lines = 0
    sec = 0
    with open(tmp, "wb", buffering=0) as f:
        while True:
            parts = []
            for _ in range(CHUNK_BLOCKS):
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(START + sec))
                sec += 1
                if a.format == "journal":
                    prefixes = [stamp + x for x in fracs[sec & 7]]
                elif a.format == "dmesg":
                    prefixes = [f"[{sec:5d}{x[:7]}]" for x in fracs[sec & 7]]
                else:
                    prefixes = [""] * BLOCK_LINES
                parts.append("".join(map(operator.add, prefixes, r.choices(pool, k=BLOCK_LINES))))
            chunk = "".join(parts).encode()
            if written + len(chunk) + 4096 <= a.size:
                f.write(chunk)
                written += len(chunk)
                lines += chunk.count(b"\n")
                continue
            # Last chunk: keep whole lines leaving room for one padding line, then pad exactly.
            room = a.size - written
            cut = chunk.rfind(b"\n", 0, max(0, room - 300)) + 1
            # never cut a multi-line entry in the middle: back off while the next line continues one
            while cut > 0 and cut < len(chunk) and continuation(chunk, cut, a.format):
                cut = chunk.rfind(b"\n", 0, cut - 1) + 1
            chunk = chunk[:cut]
            f.write(chunk)
            written += len(chunk)
            lines += chunk.count(b"\n")
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(START + sec)) + ".999999+00:00"
            head = {"journal": f"{stamp} {HOSTS[0]} systemd-journald[512]: Suppressed messages (bench padding ",
                    "dmesg": f"[{sec:5d}.999999] printk: bench padding (",
                    "ranks": "0: bench padding ("}[a.format]
            gap = a.size - written - len(head) - 2
            padding_line = head + ("x" * gap) + ")\n"
            f.write(padding_line.encode())
            written += len(padding_line)
            lines += 1
            break
    os.replace(tmp, a.out)
    dt = time.perf_counter() - t0
    assert written == a.size == os.path.getsize(a.out), (written, a.size)
    with open(__file__, "rb") as src:
        gen_sha = hashlib.sha256(src.read()).hexdigest()[:16]
    facts = {"format": a.format, "bytes": written, "lines": lines, "seed": a.seed, "generator": gen_sha,
             "pool_entries": len(pool), "match_fraction": MATCH_FRACTION,
             "gen_seconds": f"{dt:.1f}", "gen_mb_per_s": f"{written / dt / 1e6:.0f}"}
    if a.meta:
        with open(a.meta, "w") as m:
            for k, v in facts.items():
                m.write(f"{k}={v}\n")
    print(f"gen_mixed_log: {a.out}: {written} bytes, {lines} lines in {dt:.1f}s "
          f"({written / dt / 1e6:.0f} MB/s)", file=sys.stderr)


if __name__ == "__main__":
    main()
