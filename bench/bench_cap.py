"""`powerkit cap` on 1,000 GPUs x 14 h (simulated 72B, 14B and 7B jobs, aligned), 5 ratios x 3
policies, next to `powerkit oversub` on the same fleet (its default 200 random draws) in the
same run: the target is cap within 2x oversub's time, its memory bounded as oversub's is (a
block of cells of every member at a time, never the fleet's horizon).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from inputs import cached_input, run_measured  # noqa: E402

EXE = str(Path(sys.executable).with_name("powerkit"))
JOBS = ("h200-dense-pretrain", "h200-moe-pretrain", "h200-moe-finetune")


def recorder(preset: str, *extra: str):  # type: ignore[no-untyped-def]
    def make(path: Path) -> None:
        subprocess.run(
            [
                EXE,
                "record",
                "--backend",
                "sim",
                "--preset",
                preset,
                "--duration",
                "14h",
                *extra,
                "--out",
                str(path),
                "--quiet",
            ],
            check=True,
        )

    return make


def sweep(job: str):  # type: ignore[no-untyped-def]
    def make(path: Path) -> None:
        subprocess.run(
            [
                EXE,
                "pfi",
                "sweep",
                "--backend",
                "sim",
                "--preset",
                job,
                "--caps",
                "200W,300W,400W,500W,600W,700W",
                "--point",
                "10m",
                "--out",
                str(path),
                "--json",
            ],
            check=True,
            capture_output=True,
        )

    return make


def main() -> None:
    b72 = cached_input("cap_72b_14h.parquet", recorder("a100-72b-tp4", "--concurrency", "2"))
    b14 = cached_input("cap_14b_14h.parquet", recorder("a100-14b"))
    b7 = cached_input("cap_7b_14h.parquet", recorder("a100-7b"))
    sweeps = [cached_input(f"cap_{job}.parquet", sweep(job)) for job in JOBS]
    members = [f"{b72}:63", f"{b14}:124", f"{b7}:500"]  # (4, 2 and 1 GPUs a trace: 1,000)
    over = run_measured([EXE, "oversub", *members, "--compose", "random", "--json"])
    assign = [f"{p}={j}" for p, j in zip((b72, b14, b7), JOBS, strict=True)]
    cap = run_measured(
        [
            EXE,
            "cap",
            *members,
            "--ratios",
            "1,1.25,1.5,1.75,2",
            "--policy",
            "uniform,pfi,polca",
            *(a for s in sweeps for a in ("--jobs", str(s))),
            *(a for x in assign for a in ("--assign", x)),
            "--classes",
            f"{JOBS[2]}=1",
            "--json",
        ]
    )
    for name, m in (("oversub", over), ("cap", cap)):
        if m.code != 0:
            raise SystemExit(f"{name} failed: {m.stderr.strip()[-400:]}")
    print(
        f"cap: 1,000 GPUs x 14 h, 5 ratios x 3 policies: {cap.wall_s:.1f} s, {cap.peak_mb:.0f} "
        f"MB; oversub on the same fleet (200 random draws) {over.wall_s:.1f} s, "
        f"{over.peak_mb:.0f} MB -> {cap.wall_s / over.wall_s:.2f}x (target <= 2x)"
    )


if __name__ == "__main__":
    main()
