#!/usr/bin/env python3
"""The DCGM exporter's series for this sample's two nodes, as OpenMetrics (seconds) on stdout, or
with --prometheus-text as Prometheus' text format with millisecond stamps (VictoriaMetrics'
/api/v1/import/prometheus). One sample every 30 s from 01:50 to 03:50 UTC: gpu-m01's GPU 3
(0000:5d:00.0) remaps a row for an uncorrectable error at 03:30:30; everything else is quiet.
Constructed, not recorded: names and labels as dcgm-exporter publishes them (its counters file)."""
import calendar, sys

t0 = calendar.timegm((2024, 9, 14, 1, 50, 0))
t1 = calendar.timegm((2024, 9, 14, 3, 50, 0))
event = calendar.timegm((2024, 9, 14, 3, 30, 30))
pci = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
       "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]
text = "--prometheus-text" in sys.argv
out = []
for metric in ["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_TEMP"]:
    if not text:
        out.append(f"# TYPE {metric} gauge")
    for host in ["gpu-m01", "gpu-m02"]:
        for g in range(8):
            labels = (f'gpu="{g}",UUID="GPU-{host[-2:]}00{g:02d}aa-1b2c-3d4e-5f60-718293a4b5c6",pci_bus_id="{pci[g]}",'
                      f'device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="{host}",instance="{host}:9400",job="dcgm"')
            for t in range(t0, t1 + 1, 30):
                if metric == "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS":
                    v = 1 if (host == "gpu-m01" and g == 3 and t >= event) else 0
                elif metric == "DCGM_FI_DEV_XID_ERRORS":
                    v = 0
                else:
                    v = 61 + g % 3
                out.append(f"{metric}{{{labels}}} {v} {t * 1000 if text else t}")
if not text:
    out.append("# EOF")
sys.stdout.write("\n".join(out) + "\n")
