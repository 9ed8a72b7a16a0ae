#!/usr/bin/env python3
"""Generate samples/cascade64-xid79: a 64-node, 512-rank PyTorch job in which one GPU on
gpu-b17 falls off the bus (Xid 79) and every other rank fails downstream of it (NCCL IB
completion errors status=12, ncclRemoteError, 'Connection closed by localRank', ProcessGroupNCCL
watchdog timeouts).  Deterministic: random.Random(64) is the only randomness.

Usage: scripts/gen-sample-cascade64.py [OUTDIR]   (default: samples/cascade64-xid79)
"""
import datetime as dt
import json
import os
import random
import shutil
import sys

UTC = dt.timezone.utc
rng = random.Random(64)

JOB = '7731842'
NNODES = 64
GPN = 8
HOSTS = ['gpu-b%02d' % i for i in range(1, NNODES + 1)]
BAD = 'gpu-b17'
BAD_LOCAL = 3
BUSES = ['18', '2a', '3a', '5d', '9a', 'ab', 'ba', 'db']
START = dt.datetime(2024, 6, 3, 2, 0, 0, tzinfo=UTC)
T0 = dt.datetime(2024, 6, 3, 5, 41, 17, 402118, tzinfo=UTC)   # the Xid 79
END = T0 + dt.timedelta(seconds=626)
NCCL_VER = '2.19.3+cuda12.3'


def S(t, sec):
    return t + dt.timedelta(seconds=sec)


def ip(host):
    return '10.12.0.%d' % int(host[-2:])


def boot(host):
    k = int(host[-2:])
    return dt.datetime(2024, 5, 29, 7, 0, 0, tzinfo=UTC) + dt.timedelta(minutes=k * 3, seconds=k * 7 % 60)


def uuid(host, i):
    h = (int(host[-2:]) * 7919 + i * 104729) * 2654435761 % (1 << 64)
    return 'GPU-%08x-%04x-%04x-%04x-%012x' % (h >> 32, h >> 16 & 0xffff, h & 0xffff, (h >> 8) & 0xffff, h % (1 << 48))


def raw(host, t):
    s = (t - boot(host)).total_seconds()
    i = int(s)
    return '[%5d.%06d]' % (i, int(round((s - i) * 1e6)))


def pid(host, lr):
    return 51000 + int(host[-2:]) * 17 + lr * 3


def glog(t, p, lvl='E'):
    return '%s%s %s.%06d %d' % (lvl, t.strftime('%m%d'), t.strftime('%H:%M:%S'), t.microsecond, p)


files = {}


def emit(path, t, line):
    files.setdefault(path, []).append((t, len(files.get(path, [])), line))


OUT = 'slurm-%s.out' % JOB


def rank_line(r, t, text):
    emit(OUT, t, '%d: %s' % (r, text))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'samples', 'cascade64-xid79')
    out = os.path.normpath(out)
    bad_idx = HOSTS.index(BAD)
    bad_rank = bad_idx * GPN + BAD_LOCAL

    # ---- kernel logs: boot noise before the job, benign noise during, the Xid on gpu-b17 ----
    for h in HOSTS:
        k = 'nodes/%s/dmesg.txt' % h
        b = boot(h)
        for sec, msg in [(0.0, 'Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024 (Ubuntu 5.15.0-105.115-generic 5.15.148)'),
                         (0.0, 'Command line: BOOT_IMAGE=/vmlinuz-5.15.0-105-generic root=UUID=3e5c2a10-9b7e-4b8a-a1f4-1c2d0e9f7a51 ro iommu=pt pci=realloc=off'),
                         (21.402311, 'nvidia: module license \'NVIDIA\' taints kernel.'),
                         (21.517730, 'NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08  Sat Feb 17 22:55:48 UTC 2024'),
                         (22.934120, 'nvidia-nvlink: Nvlink Core is being initialized, major device number 506'),
                         (24.110942, 'mlx5_core 0000:0c:00.0: mlx5_ib: IB port 1 active, link width 4X, speed NDR'),
                         ]:
            t = S(b, sec)
            emit(k, t, '%s %s' % (raw(h, t), msg))
        # job prolog / during job benign noise
        t = S(START, -6.1 + (int(h[-2:]) % 5) * 0.13)
        emit(k, t, '%s audit: type=1400 audit(%d.%03d:%d): apparmor="DENIED" operation="open" profile="snap.lxd.hook.install" name="/proc/sys/kernel/osrelease" pid=%d comm="slurmd"' % (raw(h, t), int(t.timestamp()), t.microsecond // 1000, 311 + int(h[-2:]), 2011))
        t = S(START, 3.2 + int(h[-2:]) * 0.01)
        emit(k, t, '%s IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready' % raw(h, t) if h == 'gpu-b40' else '%s nvidia-uvm: Loaded the UVM driver, major device number 508.' % raw(h, t))
        t = S(START, 1800 + rng.random() * 4000)
        emit(k, t, '%s perf: interrupt took too long (2502 > 2500), lowering kernel.perf_event_max_sample_rate to 79750' % raw(h, t))

    k = 'nodes/%s/dmesg.txt' % BAD
    bus = BUSES[BAD_LOCAL]
    bp = pid(BAD, BAD_LOCAL)
    for dtm, msg in [(0.0, 'NVRM: GPU at PCI:0000:%s:00: %s' % (bus, uuid(BAD, BAD_LOCAL))),
                     (0.000004, 'NVRM: GPU Board Serial Number: 1654923010884'),
                     (0.000011, "NVRM: Xid (PCI:0000:%s:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." % bus),
                     (0.000019, 'NVRM: GPU 0000:%s:00.0: GPU has fallen off the bus.' % bus),
                     (0.000402, 'NVRM: A GPU crash dump has been created. If possible, please run\nNVRM: nvidia-bug-report.sh as root to collect this data before\nNVRM: the NVIDIA kernel module is unloaded.'),
                     (2.918733, 'NVRM: Xid (PCI:0000:%s:00): 45, pid=%d, name=python, Ch 00000010' % ('2a', pid(BAD, 1))),
                     (3.001210, 'NVRM: Xid (PCI:0000:%s:00): 45, pid=%d, name=python, Ch 00000010' % ('9a', pid(BAD, 4))),
                     ]:
        t = S(T0, dtm - 0.000011)
        for i, part in enumerate(msg.split('\n')):
            emit(k, t, '%s %s' % (raw(BAD, t), part))

    # ---- rank logs (srun --label) ----
    for idx, h in enumerate(HOSTS):
        for lr in range(GPN):
            r = idx * GPN + lr
            p = pid(h, lr)
            tid = p + 71
            # startup NCCL INFO
            t = S(START, 41.0 + idx * 0.02 + lr * 0.001)
            rank_line(r, t, '%s:%d:%d [%d] NCCL INFO NCCL_IB_HCA set to mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_6,mlx5_7,mlx5_8,mlx5_9' % (h, p, p, lr))
            if r == 0:
                rank_line(r, S(t, 0.001), '%s:%d:%d [0] NCCL INFO NCCL version %s' % (h, p, p, NCCL_VER))
            rank_line(r, S(t, 0.4), '%s:%d:%d [%d] NCCL INFO comm 0x%x rank %d nranks 512 cudaDev %d nvmlDev %d busId %s000 commId 0x5a1c9e03b2f4d871 - Init COMPLETE' % (h, p, tid, lr, 0x55d4a000 + r * 0x100, r, lr, lr, BUSES[lr]))
    # progress lines from rank 0
    t = S(START, 120)
    step = 0
    while t < S(T0, -30):
        step += 50
        rank_line(0, t, '[%s] iteration %6d/ 200000 | consumed samples: %9d | elapsed time per iteration (ms): 1391.2 | learning rate: 2.998E-04 | global batch size:  1024 | lm loss: %.6E | loss scale: 1.0 | grad norm: 0.291 |' % (t.strftime('%Y-%m-%d %H:%M:%S'), step, step * 1024, 2.1 + 4.0 / (1 + step / 900.0)))
        t = S(t, 69.56)

    # the failing rank on gpu-b17
    p = pid(BAD, BAD_LOCAL)
    t = S(T0, 0.31)
    rank_line(bad_rank, t, "%s:%d:%d [%d] enqueue.cc:1556 NCCL WARN Cuda failure 'unspecified launch failure'" % (BAD, p, p + 71, BAD_LOCAL))
    rank_line(bad_rank, S(t, 0.02), '%s:%d:%d [%d] NCCL INFO enqueue.cc:1602 -> 1' % (BAD, p, p + 71, BAD_LOCAL))
    t = S(t, 0.9)
    rank_line(bad_rank, t, '[rank%d]:[%s ProcessGroupNCCL.cpp:1316] [PG 0 Rank %d] Process group watchdog thread terminated with exception: CUDA error: unspecified launch failure' % (bad_rank, glog(t, p), bad_rank))
    rank_line(bad_rank, t, 'CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.')
    rank_line(bad_rank, t, 'For debugging consider passing CUDA_LAUNCH_BLOCKING=1.')
    rank_line(bad_rank, t, 'Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.')

    # who is near gpu-b17 on the IB rings: direct neighbours see retry-exceeded completions
    near = [HOSTS[(bad_idx + d) % NNODES] for d in (-2, -1, 1, 2)]
    far = [h for h in HOSTS if h not in near and h != BAD]
    far_rng = list(far)
    rng.shuffle(far_rng)
    remote = set(far_rng[:22])            # error propagated through NCCL proxies
    hanging = set(far_rng[22:])           # stuck in the allreduce until the watchdog fires

    # other local ranks on gpu-b17: proxy sees the dead peer
    for lr in range(GPN):
        if lr == BAD_LOCAL:
            continue
        r = bad_idx * GPN + lr
        p = pid(BAD, lr)
        t = S(T0, 1.7 + lr * 0.011)
        rank_line(r, t, '%s:%d:%d [%d] proxy.cc:1508 NCCL WARN [Proxy Service %d] Failed to execute operation Connect from rank %d, retcode 6' % (BAD, p, p + 90, lr, r, bad_rank))
        rank_line(r, S(t, 0.3), '%s:%d:%d [%d] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer %s<%d>' % (BAD, p, p + 90, lr, BAD, 40211 + lr))
        rank_line(r, S(t, 0.31), '%s:%d:%d [%d] proxy.cc:1143 NCCL WARN [Service thread] Connection closed by localRank %d' % (BAD, p, p + 90, lr, BAD_LOCAL))
        rank_line(r, S(t, 1.5), '[rank%d]:[%s ProcessGroupNCCL.cpp:1297] [PG 0 Rank %d] NCCL watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version %s' % (r, glog(S(t, 1.5), p), r, NCCL_VER[:6]))
        rank_line(r, S(t, 1.5), 'ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.')
        rank_line(r, S(t, 1.5), 'Last error:')
        rank_line(r, S(t, 1.5), 'socketProgress: Connection closed by remote peer %s<%d>' % (BAD, 40211 + lr))

    for j, h in enumerate(near):
        idx = HOSTS.index(h)
        for lr in range(GPN):
            r = idx * GPN + lr
            p = pid(h, lr)
            t = S(T0, 7.52 + j * 0.03 + lr * 0.004)
            for n in range(3):
                rank_line(r, S(t, n * 0.0003), '%s:%d:%d [%d] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer %s<%d> with status=12 opcode=%d len=0 vendor err 129 (%s) localGid ::ffff:%s remoteGids::ffff:%s' % (
                    h, p, p + 93, lr, ip(BAD), 58200 + lr * 4 + n, 0 if n % 2 == 0 else 129, 'Send' if n % 2 == 0 else 'Recv', ip(h), ip(BAD)))
            rank_line(r, S(t, 0.002), '%s:%d:%d [%d] NCCL INFO transport/net.cc:1302 -> 6' % (h, p, p + 93, lr))
            rank_line(r, S(t, 0.002), '%s:%d:%d [%d] NCCL INFO proxy.cc:726 -> 6' % (h, p, p + 93, lr))
            rank_line(r, S(t, 0.003), '%s:%d:%d [%d] NCCL INFO proxy.cc:905 -> 6 [Progress Thread]' % (h, p, p + 93, lr))
            t2 = S(t, 1.1)
            rank_line(r, t2, '[rank%d]:[%s ProcessGroupNCCL.cpp:1297] [PG 0 Rank %d] NCCL watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version %s' % (r, glog(t2, p), r, NCCL_VER[:6]))
            rank_line(r, t2, 'ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.')
            rank_line(r, t2, 'Last error:')
            rank_line(r, t2, 'NET/IB : Got completion from peer %s<%d> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:%s remoteGids::ffff:%s' % (ip(BAD), 58200 + lr * 4, ip(h), ip(BAD)))

    for h in sorted(remote):
        idx = HOSTS.index(h)
        for lr in range(GPN):
            r = idx * GPN + lr
            p = pid(h, lr)
            t = S(T0, 9.0 + rng.random() * 6.0)
            peer_local = (lr + 1) % GPN
            rank_line(r, t, '%s:%d:%d [%d] proxy.cc:1143 NCCL WARN [Service thread] Connection closed by localRank %d' % (h, p, p + 90, lr, peer_local))
            t2 = S(t, 0.8 + rng.random())
            rank_line(r, t2, '[rank%d]:[%s ProcessGroupNCCL.cpp:1297] [PG 0 Rank %d] NCCL watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version %s' % (r, glog(t2, p), r, NCCL_VER[:6]))
            rank_line(r, t2, 'ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.')
            rank_line(r, t2, 'Last error:')
            rank_line(r, t2, 'socketProgress: Connection closed by remote peer %s<%d>' % (HOSTS[(idx + 1) % NNODES], 43000 + lr))

    coll_start = S(T0, -1.379)
    for h in sorted(hanging):
        idx = HOSTS.index(h)
        for lr in range(GPN):
            r = idx * GPN + lr
            p = pid(h, lr)
            ran = 600000 + rng.randint(8, 90)
            t = S(coll_start, ran / 1000.0 + lr * 0.0007)
            rank_line(r, t, '[rank%d]:[%s ProcessGroupNCCL.cpp:607] [Rank %d] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=18233, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for %d milliseconds before timing out.' % (r, glog(t, p), r, ran))
            t2 = S(t, 0.004)
            rank_line(r, t2, '[rank%d]:[%s ProcessGroupNCCL.cpp:1537] [PG 0 Rank %d] Timeout at NCCL work: 18233, last enqueued NCCL work: 18233, last completed NCCL work: 18232.' % (r, glog(t2, p), r))
            rank_line(r, t2, '[rank%d]:[%s ProcessGroupNCCL.cpp:621] [Rank %d] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.' % (r, glog(t2, p), r))
            rank_line(r, t2, '[rank%d]:[%s ProcessGroupNCCL.cpp:627] [Rank %d] To avoid data inconsistency, we are taking the entire process down.' % (r, glog(t2, p), r))

    # srun teardown
    t = S(T0, 2.6)
    emit(OUT, t, 'srun: error: %s: task %d: Exited with exit code 1' % (BAD, bad_rank))
    for j, h in enumerate([BAD] + near + sorted(remote)):
        idx = HOSTS.index(h)
        t = S(T0, 18 + j * 0.05)
        emit(OUT, t, 'srun: error: %s: tasks %d-%d: Exited with exit code 1' % (h, idx * GPN, idx * GPN + GPN - 1))
    for j, h in enumerate(sorted(hanging)):
        idx = HOSTS.index(h)
        t = S(coll_start, 601.5 + j * 0.02)
        emit(OUT, t, 'srun: error: %s: tasks %d-%d: Exited with exit code 1' % (h, idx * GPN, idx * GPN + GPN - 1))
    emit(OUT, S(END, -3), 'srun: Job step aborted: Waiting up to 32 seconds for job step to finish.')

    # ---- write ----
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    job = {'job_id': JOB, 'state': 'FAILED', 'exit_code': '1:0',
           'start_time': START.strftime('%Y-%m-%dT%H:%M:%SZ'), 'end_time': END.strftime('%Y-%m-%dT%H:%M:%SZ'),
           'nodelist': 'gpu-b[01-64]', 'time_limit': '1-00:00:00', 'ntasks_per_node': GPN}
    with open(os.path.join(out, 'job.json'), 'w') as fh:
        json.dump(job, fh, indent=2)
        fh.write('\n')
    for h in HOSTS:
        d = os.path.join(out, 'nodes', h)
        os.makedirs(d)
        nj = {'boot_time': boot(h).strftime('%Y-%m-%dT%H:%M:%SZ'),
              'gpus': [{'index': i, 'pci_bus_id': '00000000:%s:00.0' % b.upper(), 'uuid': uuid(h, i)} for i, b in enumerate(BUSES)],
              'hcas': [{'name': 'mlx5_%d' % i, 'pci': '0000:%s:00.0' % b, 'port': 1} for i, b in enumerate(['0c', '1f', '47', '5a', '8f', 'a2', 'c3', 'd4'])],
              'local_rank_to_gpu_index': {str(i): i for i in range(GPN)}}
        with open(os.path.join(d, 'node.json'), 'w') as fh:
            json.dump(nj, fh, indent=2)
            fh.write('\n')
    for path, lines in files.items():
        lines.sort(key=lambda x: (x[0], x[1]))
        with open(os.path.join(out, path), 'w') as fh:
            for _, _, line in lines:
                fh.write(line + '\n')
    exp = {'terminal_state': 'fail', 'sub_domain': 'hardware', 'responsible_nodes': [BAD], 'cause_rule': 'xid.79',
           'device': '0000:%s:00.0' % BUSES[BAD_LOCAL],
           'why': 'gpu-b17 logs Xid 79 (GPU 0000:5d:00.0 fell off the bus) at 05:41:17; every NCCL error on the other 63 nodes '
                  '(IB status=12 from peer 10.12.0.17, ncclRemoteError, Connection closed by localRank, 600 s watchdog timeouts) comes seconds to minutes later and is downstream of it.'}
    with open(os.path.join(out, 'expected.json'), 'w') as fh:
        json.dump(exp, fh, indent=2)
        fh.write('\n')


if __name__ == '__main__':
    main()
