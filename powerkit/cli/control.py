"""``powerkit control``: train a PPO controller, judge it against baselines, run it live."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from powerkit.cli.common import JsonOpt, emit_json, err, handle_errors, refuse_overwrite
from powerkit.control.env import RewardWeights
from powerkit.control.evaluate import Episode
from powerkit.control.train import (
    ARMS,
    EvalReport,
    evaluate_policy,
    load_policy,
    report_json,
    train_policy,
)
from powerkit.errors import BadInputError
from powerkit.report import write_page
from powerkit.report.control_section import control_section
from powerkit.sim import get_preset
from powerkit.units import format_value, parse_duration, parse_power

__all__ = ["control_app"]

control_app = typer.Typer(help="A PPO controller that holds a power budget with workload knobs.")


def _share(text: str, what: str) -> float:
    spec = parse_power(text)
    if not spec.is_relative or spec.fraction is None:
        raise BadInputError(f"{what} {text!r}: give a percentage, e.g. 5%")
    return spec.fraction


@control_app.command("train")
@handle_errors
def train(
    out: Annotated[Path, typer.Option("--out", "-o", help="Policy file to write (.npz).")],
    budget: Annotated[str, typer.Option("--budget", help="Per-GPU budget, e.g. 314.6W or 80%.")],
    env: Annotated[str, typer.Option("--env", help="Training environment: sim.")] = "sim",
    preset: Annotated[str, typer.Option("--preset", help="sim: workload preset.")] = "a100-7b",
    knob: Annotated[str, typer.Option("--knob", help="group_size or concurrency.")] = "group_size",
    steps: Annotated[int, typer.Option("--steps", help="Control periods to train on.")] = 500,
    seed: Annotated[int, typer.Option("--seed", help="Seed of training.")] = 0,
    target: Annotated[
        str, typer.Option("--target", help="Violation share allowed at 0.5 s.")
    ] = "5%",
    w_tokens: Annotated[float, typer.Option("--w-tokens", help="Reward weight of tokens.")] = 1.0,
    w_violation: Annotated[
        float, typer.Option("--w-violation", help="Weight of excess energy.")
    ] = 2.0,
    w_target: Annotated[
        float, typer.Option("--w-target", help="Weight of violations beyond the target.")
    ] = 10.0,
    w_switch: Annotated[float, typer.Option("--w-switch", help="Cost of a knob change.")] = 0.01,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Train the controller on the simulated job; write the policy."""
    if env != "sim":
        raise BadInputError(f"--env {env!r}: this version trains on the simulator (sim)")
    refuse_overwrite(out, force)
    if steps < 1:
        raise BadInputError("--steps must be at least 1")
    budget_w = parse_power(budget).resolve(get_preset(preset).tdp_w)
    weights = RewardWeights(w_tokens, w_violation, w_target, w_switch)

    def progress(done: int, stats: dict[str, float]) -> None:
        if not json_out:
            err.print(
                f"[{done}/{steps}] reward {stats['reward']:.3f} entropy {stats['entropy']:.3f}"
            )

    spec = train_policy(
        preset,
        budget_w,
        knob,
        out,
        steps=steps,
        seed=seed,
        target=_share(target, "--target"),
        weights=weights,
        on_update=progress,
    )
    if json_out:
        emit_json({"out": str(out), **spec.__dict__})
    else:
        err.print(f"wrote {out}: {knob} over {spec.ladder} on {preset}, budget {budget_w:g} W")


def _percent(share: float | None, spec: str) -> str:
    return format_value(None if share is None else 100 * share, spec)


def render(report: EvalReport) -> None:
    """Print the arms table."""
    out = Console()
    out.print(
        f"[bold]{report.preset}[/], knob {report.knob}, budget {report.budget_w:g} W, "
        f"{report.seeds} seed(s) x {report.horizon_s / 3600:g} h; static safe = "
        f"{report.knob} {report.static_safe}"
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    for h in (
        "arm",
        "viol 0.5s",
        "viol 30s",
        "tokens M",
        "tok/MWh M",
        "Wh/1k",
        "vs unc.",
        "vs safe",
    ):
        table.add_column(h, no_wrap=True, justify="left" if h == "arm" else "right")
    for a in report.arms:
        vu, vs = a.vs_uncontrolled, a.vs_static_safe
        table.add_row(
            a.arm,
            f"{100 * a.violation_rate_0_5s['mean']:.2f}%±{100 * a.violation_rate_0_5s['std']:.2f}",
            f"{100 * a.violation_rate_30s['mean']:.2f}%",
            f"{a.tokens['mean'] / 1e6:.2f}",
            f"{a.tokens_per_mwh['mean'] / 1e6:.0f}",
            f"{a.wh_per_1k_tokens['mean']:.3f}",
            _percent(vu.get("violation_rate_0_5s"), "+.0f") + "% viol",
            _percent(vs.get("tokens"), "+.1f") + "% tok",
        )
    out.print(table)


@control_app.command("eval")
@handle_errors
def evaluate(
    policy: Annotated[Path, typer.Option("--policy", help="Policy file from control train.")],
    env: Annotated[str, typer.Option("--env", help="Evaluation environment: sim.")] = "sim",
    preset: Annotated[
        str | None, typer.Option("--preset", help="sim: preset (default: the policy's).")
    ] = None,
    budget: Annotated[
        str | None, typer.Option("--budget", help="Budget (default: the policy's).")
    ] = None,
    seeds: Annotated[int, typer.Option("--seeds", help="Evaluation seeds per arm.")] = 5,
    horizon: Annotated[str, typer.Option("--horizon", help="Job time per seed.")] = "8h",
    arms: Annotated[str, typer.Option("--arms", help="Arms to run.")] = ",".join(ARMS),
    html: Annotated[Path | None, typer.Option("--html", help="Write a Plotly page here.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Run every arm over seeds; report violations at 0.5 s and 30 s, tokens and efficiency."""
    if env != "sim":
        raise BadInputError(f"--env {env!r}: this version evaluates on the simulator (sim)")
    if not policy.exists():
        raise BadInputError(f"{policy}: no such file")
    if seeds < 1:
        raise BadInputError("--seeds must be at least 1")
    agent, spec = load_policy(policy)
    chosen = tuple(a.strip() for a in arms.split(",") if a.strip())
    budget_w = (
        parse_power(budget).resolve(get_preset(preset or spec.preset).tdp_w) if budget else None
    )

    def progress(e: Episode) -> None:
        if not json_out:
            err.print(
                f"{e.arm} seed {e.seed}: {100 * e.violation_rate_0_5s:.2f}% over budget, "
                f"{e.tokens / 1e6:.2f} M tokens"
            )

    report = evaluate_policy(
        agent,
        spec,
        budget_w=budget_w,
        preset=preset,
        seeds=seeds,
        horizon_s=parse_duration(horizon),
        arms=chosen,
        keep_traces=html is not None,
        on_episode=progress,
    )
    if html is not None:
        gpus = get_preset(report.preset).gpus
        write_page(html, "powerkit control eval", [control_section(report, gpus)])
        if not json_out:
            err.print(f"wrote {html}")
    if json_out:
        emit_json(report_json(report))
    else:
        render(report)
