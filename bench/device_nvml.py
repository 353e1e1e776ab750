"""On a real NVIDIA GPU: record 60 s under load with limits and clock-event reasons, step the
power cap and lock the SM clock in the middle, read power smoothing where the GPU has it, and
print the figures (issue 30's device check).

    python bench/device_nvml.py [--gpu 0] [--seconds 60] [--out DIR]

The load is a matmul loop in a child process (PyTorch, else CuPy). Timeline, as shares of
``--seconds``: 0-30 % free, 30-55 % capped at 60 % of the default limit, 55-65 % free, 65-85 %
the SM clock locked at half its range, 85-100 % free. The cap and the lock go through powerkit's
PowerCaps and LockedClocks (journaled first, put back on exit, error or signal), and the script
checks the limit and the clocks are back at the end. Everything it measured is printed and
written to ``--out`` (default ``$OUT`` or ``device_out``): the trace, and a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl

LOAD = textwrap.dedent(
    """
    import sys, time
    seconds = float(sys.argv[1]); gpu = int(sys.argv[2])
    try:
        import torch
        dev = torch.device(f"cuda:{gpu}")
        a = torch.randn(8192, 8192, device=dev, dtype=torch.float16); b = torch.randn_like(a)
        sync = torch.cuda.synchronize
        step = lambda: a @ b
    except ImportError:
        import cupy
        cupy.cuda.Device(gpu).use()
        a = cupy.random.randn(8192, 8192, dtype=cupy.float32).astype(cupy.float16); b = a.copy()
        sync = cupy.cuda.Device(gpu).synchronize
        step = lambda: a @ b
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        for _ in range(20):
            step()
        sync(); n += 20
    print(f"load: {n} matmuls of 8192^2 fp16", flush=True)
    """
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "device_out")))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("POWERKIT_STATE_DIR", str(args.out / "state"))

    from powerkit.actuation.caps import LockedClocks, PowerCaps
    from powerkit.actuation.smoothing import smoothing_state
    from powerkit.analysis.info import trace_info
    from powerkit.analysis.limits import reason_names
    from powerkit.analysis.windows import windowed_violations
    from powerkit.core.errors import PowerkitError
    from powerkit.core.units import PowerSpec
    from powerkit.telemetry.nvml import NvmlGpu, NvmlSource, nvml_session
    from powerkit.telemetry.recorder import RecordConfig, record
    from powerkit.trace import read_trace

    summary: dict[str, object] = {"gpu": args.gpu, "seconds": args.seconds}
    source = NvmlSource([args.gpu])
    gpu = source.gpus[0]
    name, default = gpu.name(), gpu.default_power_limit_w()
    lo, hi = gpu.power_limit_range_w()
    cap = max(lo, round(0.6 * (default or hi)))
    original = gpu.power_limit_w()
    print(f"GPU {args.gpu}: {name}, default limit {default} W, range {lo}-{hi} W, now {original} W")
    summary |= {
        "name": name,
        "default_limit_w": default,
        "limit_range_w": [lo, hi],
        "limit_before_w": original,
        "driver": source.extra_metadata().get("driver"),
    }
    try:
        smoothing = smoothing_state([args.gpu]).gpus[0]
    except PowerkitError as exc:
        smoothing = {"error": str(exc)}
    print(
        f"power smoothing: {smoothing.get('smoothing')}; power profiles: "
        f"{smoothing.get('power_profiles')}"
    )
    summary["smoothing"] = smoothing

    load = subprocess.Popen(
        [sys.executable, "-c", LOAD, str(args.seconds + 10), str(args.gpu)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    time.sleep(5)  # the load's start-up (CUDA context, allocation)
    events: list[tuple[str, float]] = []
    stop = threading.Event()
    out = args.out / "gpu.parquet"
    T = args.seconds

    def actuate(caps: PowerCaps | None, clocks: LockedClocks | None) -> None:
        t0 = time.time()
        for at, what in ((0.30, "cap"), (0.55, "uncap"), (0.65, "lock"), (0.85, "unlock")):
            if stop.wait(max(0.0, t0 + at * T - time.time())):
                return
            try:
                if what == "cap" and caps is not None:
                    caps.set(cap)
                elif what == "uncap" and caps is not None:
                    caps.set(None)
                elif what == "lock" and clocks is not None:
                    clocks.set(round(sum(clocks.ranges[0]) / 2))
                elif what == "unlock" and clocks is not None:
                    clocks.set(None)
                events.append((what, time.time()))
                print(f"  t={time.time() - t0:5.1f} s: {what}", flush=True)
            except PowerkitError as exc:
                print(f"  {what} refused: {exc}", flush=True)

    try:
        # record() closes its source (NVML shut down once); the outer session keeps the library
        # open for the caps and clocks to be put back after it
        with nvml_session(), PowerCaps([gpu]) as caps, LockedClocks([gpu]) as clocks:
            thread = threading.Thread(target=actuate, args=(caps, clocks), daemon=True)
            thread.start()
            result = record(source, RecordConfig(out=out, interval_s=args.interval, duration_s=T))
            stop.set()
            thread.join()
    finally:
        source.close()
        load.wait(timeout=60)
    print((load.stdout.read() if load.stdout else "").strip())
    summary["events"] = events
    summary["recording"] = {
        "ticks": result.ticks,
        "missed": result.missed_ticks,
        "samples": result.samples,
    }

    # the limit and the clocks are back
    with nvml_session():
        after = NvmlGpu(args.gpu)
        summary["limit_after_w"] = after.power_limit_w()
        summary["sm_clock_after_mhz"] = after.clocks_mhz()[0]
    print(f"limit after: {summary['limit_after_w']} W (before {original} W)")

    trace = read_trace(out)
    t = pl.from_arrow(trace.table())
    ts = t["ts"].dt.epoch("us").to_numpy() / 1e6
    power, limit = t["power_w"].to_numpy(), t["power_limit_w"].to_numpy()
    reasons = t["clock_event_reasons"].fill_null(-1).to_numpy()
    seen = {int(r): int(n) for r, n in zip(*np.unique(reasons, return_counts=True), strict=True)}
    print(
        "clock-event reasons seen:",
        {f"0x{r:x} {reason_names(r)}": n for r, n in seen.items() if r >= 0},
    )
    summary["reasons"] = {f"0x{r:x}": n for r, n in seen.items()}
    info = trace_info(trace).series[0]
    summary["info"] = {
        k: getattr(info, k)
        for k in (
            "samples",
            "mean_power_w",
            "max_power_w",
            "power_limit_min_w",
            "power_limit_max_w",
            "at_limit_share",
            "cap_throttled_share",
            "thermal_throttled_share",
            "idle_share",
        )
    }
    print("info:", summary["info"])
    budget = cap
    report = windowed_violations(trace, PowerSpec(watts=budget), [0.5, 1.0, 5.0])
    summary["windows"] = {
        "budget_w": budget,
        "at_limit_share": report.at_limit_share,
        "throttled_share": report.throttled_share,
        "violations": {w.window: w.violations for w in report.windows},
    }
    print("windows:", summary["windows"])
    when = dict(events)
    if "cap" in when and "uncap" in when:
        inside = (ts >= when["cap"]) & (ts < when["uncap"])
        below = np.flatnonzero(inside & (power <= 1.03 * cap))
        first_under = float(ts[below[0]] - when["cap"]) if below.size else None
        limited = np.flatnonzero(inside & (limit <= cap + 1))
        summary["cap_step"] = {
            "cap_w": cap,
            "limit_seen_after_s": float(ts[limited[0]] - when["cap"]) if limited.size else None,
            "power_under_cap_after_s": first_under,
            "mean_w_capped": float(power[inside][5:].mean()) if inside.sum() > 5 else None,
            "cap_throttled_samples_inside": float(np.mean((reasons[inside] & 0x84) > 0))
            if inside.any()
            else None,
        }
        print("cap step:", summary["cap_step"])
    if "lock" in when and "unlock" in when:
        held = (ts >= when["lock"] + 1) & (ts < when["unlock"])
        summary["clock_lock"] = {
            "sm_clock_mhz_median": float(np.median(t["sm_clock_mhz"].to_numpy()[held])),
            "mean_w": float(power[held].mean()),
        }
        print("clock lock:", summary["clock_lock"])
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    ok = summary["limit_after_w"] == original
    print("restored:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
