"""Fleet scale: bounded-memory `oversub`, and the local engine against Ray (printed figures).

1. `oversub` on the 1,000-GPU x 14 h trace of bench_windows.py (100.8 M samples), 200 random
   draws, three windows: bounded (spooled members, batched draws) against the in-memory
   composition it replaced, rebuilt here as the baseline (every member's float32 cells held at
   once, one draw composed at a time) — fresh processes, each with its own peak memory.
2. The same trace split into 50 canonical files (20 GPUs each): each engine-capable command
   with the local engine and with `--engine ray` on a local Ray instance (2 workers on this
   2-core machine): wall time and samples/s.
3. `oversub` on 10,000 members x 2 h (144 M samples), 200 random draws.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from bench_windows import child, generate  # noqa: E402
from inputs import OUT, cached_input  # noqa: E402

BASELINE = """
import time, numpy as np
from powerkit.trace import read_trace
from powerkit.cells.grid import series_cells
from powerkit.cells.rolling import PrefixSums, rolling
from powerkit.analysis.windows import window_cells
t0 = time.perf_counter()
trace = read_trace('{path}')
members = [(s.values.astype(np.float32), None if s.present.all() else ~s.present)
           for s in series_cells(trace, 0.5)]
horizon = min(v.size for v, _ in members)
rng = np.random.default_rng(0)
cells = window_cells([0.5, 30, 300], 0.5)
peaks = np.zeros((200, 3))
for d in range(200):
    offsets = rng.integers(0, horizon, len(members))
    power = np.zeros(horizon); missing = np.zeros(horizon, dtype=np.int32)
    for (v, gone), o in zip(members, offsets.tolist()):
        v = v[:horizon]
        power[o:] += v[: horizon - o]; power[:o] += v[horizon - o :]
        if gone is not None:
            g = gone[:horizon]; missing[o:] += g[: horizon - o]; missing[:o] += g[horizon - o :]
    present = missing == 0
    power[~present] = 0.0
    prefix = PrefixSums(power, present)
    for j, n in enumerate(cells):
        pos = rolling(prefix, n, 0.5)
        peaks[d, j] = (pos.means if pos.all_complete else pos.means[pos.complete]).max()
plate = 400.0 * len(members)
print(time.perf_counter() - t0, [round(float(np.quantile(peaks[:, j] / plate, 0.95)), 4)
                                 for j in range(3)])
"""

BOUNDED = (
    "import time; from powerkit.trace import read_trace; "
    "from powerkit.analysis.fleet import compose_fleet; t0 = time.perf_counter(); "
    "r, _ = compose_fleet([(read_trace('{path}'), 1)], [0.5, 30, 300], compose='random', "
    "draws=200, seed=0); "
    "print(time.perf_counter() - t0, [round(w.peak_fraction, 4) for w in r.windows])"
)


def split(path: Path, folder: Path, parts: int) -> None:
    """Write the trace as ``parts`` canonical files, whole series each (20 GPUs per file)."""
    from powerkit.trace import read_trace
    from powerkit.trace.writing import write_sorted

    trace = read_trace(path)
    series = sorted({(g.host, g.gpu) for g in trace.meta.gpus})
    per = -(-len(series) // parts)
    folder.mkdir(parents=True)
    for k in range(parts):
        chunk = series[k * per : (k + 1) * per]
        where = " OR ".join(f"(host = '{h}' AND gpu = {g})" for h, g in chunk)
        write_sorted(trace, trace.meta, folder / f"part-{k:02d}.parquet", where=where)


def ray_cli() -> str:
    return str(Path(sys.executable).with_name("ray"))


def start_cluster() -> str:
    """A 2-CPU Ray head on localhost (no token authentication on loopback); its address."""
    os.environ["RAY_AUTH_MODE"] = "disabled"
    subprocess.run(
        [
            ray_cli(),
            "start",
            "--head",
            "--port=6388",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        check=True,
        capture_output=True,
    )
    return "127.0.0.1:6388"


def timed(argv: list[str]) -> float:
    exe = Path(sys.executable).with_name("powerkit")
    t0 = time.perf_counter()
    subprocess.run([str(exe), *argv, "--json"], check=True, capture_output=True, cwd=OUT)
    return time.perf_counter() - t0


def main() -> None:
    fleet = cached_input("fleet_1000x14h.parquet", lambda p: generate(p, 1000, 14.0))
    samples = 1000 * 14 * 7200
    _, peak_b, text_b = child(BASELINE.format(path=fleet).strip())
    _, peak_n, text_n = child(BOUNDED.format(path=fleet))
    print(
        f"oversub 1,000 x 14 h, 200 draws: bounded {float(text_n.split()[0]):.1f} s, peak "
        f"{peak_n:.0f} MB; in-memory baseline {float(text_b.split()[0]):.1f} s, peak "
        f"{peak_b:.0f} MB (p95 peak fractions {text_n.split(' ', 1)[1]} vs "
        f"{text_b.split(' ', 1)[1]})"
    )

    folder = OUT / "fleet_1000x14h_50files"
    if not folder.exists():
        t0 = time.perf_counter()
        split(fleet, folder, 50)
        print(f"(split into 50 files in {time.perf_counter() - t0:.1f} s)")
    steps = OUT / "hourly_steps.csv"
    steps.write_text(
        "step,start\n" + "".join(f"{h},{1_767_225_600 + 3600 * h}\n" for h in range(15))
    )
    commands = {
        "windows": ["windows", str(folder), "--budget", "300W", "--windows", "0.5s,30s,5m"],
        "info": ["info", str(folder)],
        "energy": ["energy", str(folder), "--steps", str(steps)],
        "carbon": ["carbon", "--trace", str(folder), "--region", "US"],
        "oversub": ["oversub", str(folder), "--compose", "random", "--draws", "20"],
    }
    print(
        f"engines on 50 files ({samples / 1e6:.1f} M samples), best of 2; ray: a new local "
        "instance per command (2 workers, start-up included), and a running 2-CPU cluster"
    )
    address = start_cluster()
    try:
        for name, argv in commands.items():
            local = min(timed(argv) for _ in range(2))
            fresh = min(timed([*argv, "--engine", "ray"]) for _ in range(2))
            joined = min(timed([*argv, "--engine", "ray", "--address", address]) for _ in range(2))
            print(
                f"  {name:8s}: local {local:5.1f} s ({samples / local / 1e6:5.1f} M/s), "
                f"ray new {fresh:5.1f} s ({samples / fresh / 1e6:5.1f} M/s), "
                f"ray cluster {joined:5.1f} s ({samples / joined / 1e6:5.1f} M/s)"
            )
    finally:
        subprocess.run([ray_cli(), "stop", "--force"], capture_output=True)

    big = cached_input("fleet_10000x2h.parquet", lambda p: generate(p, 10000, 2.0))
    _, peak, text = child(BOUNDED.format(path=big))
    print(
        f"oversub 10,000 x 2 h (144 M samples), 200 draws: {float(text.split()[0]):.1f} s, "
        f"peak {peak:.0f} MB (p95 peak fractions {text.split(' ', 1)[1]})"
    )


if __name__ == "__main__":
    main()
