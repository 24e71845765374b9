#!/usr/bin/env python3
"""`rpa bench-attention` end to end: the JSON report has the keys issue 3 names, with
finite positive values, and --decompose's and --versus's keys only when asked for (--versus:
the other cache's median and the speedup over it, consistent with each other); the reported
SIMD target is one this build dispatches to (one of `rpa version`'s list), and --target is
honoured; bad flags fail with a message, not a crash.

usage: check_bench_attention.py RPA_BINARY
"""
import json
import math
import subprocess
import sys

RPA = sys.argv[1]
SMALL = ["--seqs", "2", "--ctx", "100", "--q-heads", "4", "--kv-heads", "2", "--head-dim", "64",
         "--page-size", "16", "--reps", "5", "--stream-mib", "8", "--threads", "1"]
REQUIRED = ["median_ms", "kv_bytes_per_s", "stream_bytes_per_s", "fma_flops_per_s",
            "roofline_fraction"]


def bench(*extra):
    out = subprocess.run([RPA, "bench-attention", *SMALL, *extra, "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    version = subprocess.run([RPA, "version"], check=True, capture_output=True, text=True).stdout
    targets = version.split("supported by this CPU:")[1].split()
    failures = []
    for mode in ["decode", "prefill", "mixed"]:
        for kv in ["bfloat16", "float8_e4m3fn", "float8_e5m2"]:
            r = bench("--mode", mode, "--kv-dtype", kv, "--q-len", "16")
            for key in REQUIRED:
                v = r.get(key)
                if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                    failures.append(f"{mode}/{kv}: {key} = {v!r}")
            if r.get("kv_dtype") != kv or r.get("mode") != mode:
                failures.append(f"{mode}/{kv}: echoed {r.get('mode')}/{r.get('kv_dtype')}")
            if r.get("target") != targets[0]:
                failures.append(f"{mode}/{kv}: target {r.get('target')!r}, dispatch uses "
                                f"{targets[0]!r} (rpa version: {targets})")
    # --decompose adds the kernel's time on cache-resident KV and the memory stream's time.
    d = bench("--decompose")
    for key in ["resident_ms", "memory_ms"]:
        v = d.get(key)
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            failures.append(f"--decompose: {key} = {v!r}")
    if not (isinstance(d.get("overlap"), (int, float)) and math.isfinite(d["overlap"])):
        failures.append(f"--decompose: overlap = {d.get('overlap')!r}")
    plain = bench()
    for key in ["resident_ms", "versus_median_ms", "speedup_vs"]:
        if key in plain:
            failures.append(f"{key} reported without its flag")
    # --versus: the same batch on a second cache dtype, calls alternated.
    vs = bench("--kv-dtype", "float8_e4m3fn", "--versus", "bfloat16")
    vm, sp = vs.get("versus_median_ms"), vs.get("speedup_vs")
    if vs.get("versus_kv_dtype") != "bfloat16" or not all(
            isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in (vm, sp)):
        failures.append(f"--versus: {vs.get('versus_kv_dtype')!r} {vm!r} {sp!r}")
    elif abs(sp - vm / vs["median_ms"]) > 1e-3 * sp:
        failures.append(f"--versus: speedup {sp} != {vm} / {vs['median_ms']}")
    forced = bench("--target", targets[-1])
    if forced.get("target") != targets[-1]:
        failures.append(f"--target {targets[-1]} reported {forced.get('target')!r}")
    for bad in (["--kv-dtype", "int4"], ["--head-dim", "0"], ["--target", "NOPE"],
                ["--versus", "float16"]):
        p = subprocess.run([RPA, "bench-attention", *SMALL, *bad], capture_output=True, text=True)
        if p.returncode == 0 or p.returncode < 0 or not p.stderr.strip():
            failures.append(f"{bad}: exit {p.returncode}, stderr {p.stderr.strip()!r}")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
