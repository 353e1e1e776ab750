"""The long controller experiments of docs/control.md ("On drifting jobs"), run and tabled.

Every job the page measures, stationary (``--drift none``) and drifting (``--drift grpo``): one
policy per job and drift (``control train --steps 500 --seed 0``; the ``--period 30s`` job on
5,000 periods), judged on five evaluation seeds paired across arms (``control eval --seeds 5
--arms ppo,allowance,predictive,static_safe,uncontrolled --json``) over horizons of at least
500 GRPO steps; and the drifting 7B job once more with 3,000 training steps and five training
seeds, the validation's choice kept (``--steps 3000 --seeds 5``). Each run's evaluation JSON
goes into ``--out`` (docs/results/control-long: the page's tables are rendered from it by
docs/outputs.py), with its commands, commit, date and time in ``runs.json``; its policy into
``--policies``. A run already there is not run again; the runs go ``--jobs`` at a time, the
longest first; then the page's two tables are printed, as the page shows them.

    python bench/control_long.py [--out DIR] [--policies DIR] [--jobs N] [--table-only]

A full run is about an hour of CPU (the 175 h joint job the most of it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from powerkit.control.evaluate import _ms

ROOT = Path(__file__).resolve().parents[1]
ARMS = "ppo,allowance,predictive,static_safe,uncontrolled"


@dataclass(frozen=True)
class Job:
    """One job of the page: how its policy is trained and how long it is judged."""

    name: str  # the page's row label
    key: str  # the file names of its policy and result
    train: tuple[str, ...]
    horizon: str
    cost: float  # arm-hours weighted by the job's simulation cost (the order runs start in)
    every_arm: bool = True  # in the first table (every arm); all runs are in the second


_7B = "`a100-7b`, 314.6 W, group size"
_GEN = "`a100-72b-tp4-gen`, 156 W, concurrency"
_GEN_PRESET = "a100-72b-tp4-gen"
_JOINT = "`a100-72b-tp4`, 237.5 W, `--knob joint`"


def jobs() -> list[Job]:
    specs = [  # (label, key, preset, budget, knob, extra options, steps, horizon, cost/hour)
        (f"{_7B} (48 h)", "7b", "a100-7b", "314.6W", "group_size", (), 500, "48h", 0.05),
        (f"{_GEN} (90 h)", "72b-gen", _GEN_PRESET, "156W", "concurrency", (), 500, "90h", 0.1),
        (f"{_GEN}, `--period 30s` (90 h)", "72b-gen-30s", _GEN_PRESET, "156W", "concurrency",
         ("--period", "30s"), 5000, "90h", 0.15),
        (f"{_JOINT} (175 h)", "72b-joint", "a100-72b-tp4", "237.5W", "joint", (), 500, "175h", 0.3),
    ]  # fmt: skip
    out = []
    for label, key, preset, budget, knob, extra, steps, horizon, cost in specs:
        hours = float(horizon.rstrip("h"))
        for drift in ("none", "grpo"):
            train = ("--preset", preset, "--budget", budget, "--knob", knob, *extra)
            train += ("--steps", str(steps), "--seed", "0", "--drift", drift)
            out.append(Job(label, f"{key}-{drift}", train, horizon, hours * cost))
    longer = ("--preset", "a100-7b", "--budget", "314.6W", "--knob", "group_size")
    longer += ("--steps", "3000", "--seeds", "5", "--drift", "grpo")
    label = "`a100-7b`, 3,000 steps × 5 training seeds (48 h)"
    out.append(Job(label, "7b-3000x5-grpo", longer, "48h", 48 * 0.05 + 60, every_arm=False))
    return out  # (the page's order)


def powerkit(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "powerkit", *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"powerkit {' '.join(args)}: exit {done.returncode}: {done.stderr}")
    return done.stdout


MANIFEST = "runs.json"
_LOCK = threading.Lock()


def run(job: Job, out: Path, policies: Path) -> None:
    result = out / f"{job.key}.json"
    if result.exists():
        return
    began = time.perf_counter()
    policy = policies / f"{job.key}.npz"
    train = ("control", "train", *job.train, "--out", policy.name)
    if not policy.exists():
        powerkit(*train[:-1], str(policy))
    drift = job.train[job.train.index("--drift") + 1]
    evaluate = (
        "control", "eval", "--policy", policy.name, "--seeds", "5", "--horizon", job.horizon,
        "--arms", ARMS, "--drift", drift, "--json",
    )  # fmt: skip
    text = powerkit(*evaluate[:3], str(policy), *evaluate[4:])
    _write(result, text)
    record = {
        "train": "powerkit " + " ".join(train),
        "eval": "powerkit " + " ".join(evaluate),
        "commit": _commit(),
        "date": time.strftime("%Y-%m-%d"),
        "seconds": round(time.perf_counter() - began),
    }
    with _LOCK:
        manifest = out / MANIFEST
        runs = json.loads(manifest.read_text()) if manifest.exists() else {}
        runs[job.key] = record
        _write(manifest, json.dumps(runs, indent=1, sort_keys=True) + "\n")
    print(f"  {job.key}: {record['seconds']} s", file=sys.stderr)


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def _ci(stat: dict[str, float], scale: float, spec: str) -> str:
    return (
        f"{stat['mean'] * scale:{spec}} [{stat['ci95_low'] * scale:{spec}}, "
        f"{stat['ci95_high'] * scale:{spec}}]"
    )


def tables(out: Path) -> str:
    """The page's two tables from the runs' JSON (a run not yet done is left out)."""
    every = _head(
        "job", "drift", "arm", "violations 0.5 s (%)", "tokens (M)", "tokens/MWh (G)",
        "tokens vs static safe, paired (%)", "periods under a cap (%)",
    )  # fmt: skip
    against = _head(
        "job", "drift", "static safe", "best rule", "PPO tokens vs best rule, paired (%)",
        "PPO violations − best rule's (points)", "PPO tokens vs static safe, paired (%)",
    )  # fmt: skip
    for job in jobs():
        if not (out / f"{job.key}.json").exists():
            continue
        doc = json.loads((out / f"{job.key}.json").read_text())
        arms = {a["arm"]: a for a in doc["arms"]}
        for name, arm in arms.items() if job.every_arm else ():
            paired = arm["vs_static_safe_paired"]
            vs_safe = "—" if name == "static_safe" else _ci(paired["tokens"], 100, "+.2f")
            every.append(
                f"| {job.name} | {doc['drift']} | {name} | "
                f"{_ci(arm['violation_rate_0_5s'], 100, '.2f')} | "
                f"{_ci(arm['tokens'], 1e-6, '.2f')} | {_ci(arm['tokens_per_mwh'], 1e-9, '.3f')} | "
                f"{vs_safe} | {_capped(arm.get('cap_share'))} |"
            )
        rule = doc["best_rule"]
        ppo, best = arms["ppo"], arms[rule]
        tokens = _ci(ppo["vs_best_rule_paired"]["tokens"], 100, "+.2f")
        points = _ms(  # (the judge's own mean and Student's t interval over seeds)
            [
                a["violation_rate_0_5s"] - b["violation_rate_0_5s"]
                for a, b in zip(ppo["per_seed"], best["per_seed"], strict=True)
            ]
        )
        against.append(
            f"| {job.name} | {doc['drift']} | {_static_safe(doc)} | `{rule}` | {tokens} | "
            f"{_ci(points, 100, '+.2f')} | "
            f"{_ci(ppo['vs_static_safe_paired']['tokens'], 100, '+.2f')} |"
        )
    return "\n".join(every) + "\n\n" + "\n".join(against) + "\n"


def _capped(share: float | None) -> str:
    return "—" if share is None else f"{100 * share:.1f}"


def _static_safe(doc: dict) -> str:
    """The static-safe setting the evaluation calibrated, in the knob's words."""
    knobs = doc.get("static_safe_knobs")
    if not knobs:
        return f"{doc['knob'].replace('_', ' ')} {doc['static_safe_setting']}"
    shown = [f"group size {knobs['group_size']}", f"concurrency {knobs['concurrency']}"]
    if knobs.get("power_cap_w") is not None:
        shown.append(f"cap {knobs['power_cap_w']:g} W")
    return ", ".join(shown)


def _head(*names: str) -> list[str]:
    return ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "control-long")
    parser.add_argument("--policies", type=Path, default=ROOT / "bench_out" / "control-long")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--table-only", action="store_true", help="Print the tables; run nothing.")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.policies.mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        began = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            longest_first = sorted(jobs(), key=lambda j: -j.cost)
            for done in [pool.submit(run, job, args.out, args.policies) for job in longest_first]:
                done.result()
        print(f"runs done in {time.perf_counter() - began:.0f} s", file=sys.stderr)
    print(tables(args.out), end="")


if __name__ == "__main__":
    main()
