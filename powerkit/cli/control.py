"""``powerkit control``: train a PPO controller, judge it against baselines, run it live."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from powerkit.cli import common as cli
from powerkit.cli import options as opt
from powerkit.cli.progress import progress
from powerkit.control.env import RewardWeights
from powerkit.control.evaluate import ARM_COLUMNS, Episode
from powerkit.control.job import (
    EvalOptions,
    RunOptions,
    TrainOptions,
    evaluation_arms,
    run_evaluation,
    run_policy,
    run_training,
)
from powerkit.control.judge import ARMS, EvalReport
from powerkit.control.live import Decision
from powerkit.control.train import TrainResult
from powerkit.core.choices import Backend, ControlBackend, ControlKnob, Env
from powerkit.core.units import parse_duration, parse_gpus, parse_percent, parse_power
from powerkit.report.control_section import control_section

__all__ = ["control_app"]

control_app = typer.Typer(help="A PPO controller that holds a power budget with workload knobs.")


@control_app.command("train")
@cli.handle_errors
def train(
    out: Annotated[Path, typer.Option("--out", "-o", help="Policy file to write (.npz).")],
    budget: Annotated[str, typer.Option(help="Per-GPU budget, e.g. 314.6W or 80%.")],
    env: Annotated[
        Env, typer.Option(help="sim, or trace (a trace replayed through a sweep).")
    ] = Env.sim,
    trace: Annotated[Path | None, typer.Option(help="trace: the recorded trace to replay.")] = None,
    response: Annotated[
        Path | None, typer.Option(help="trace: the sweep of the knob's response.")
    ] = None,
    period: Annotated[
        str | None, typer.Option(help="Control period (trace: 60s; sim concurrency: a step).")
    ] = None,
    preset: Annotated[str, typer.Option(help="sim: workload preset.")] = "a100-7b",
    knob: Annotated[
        ControlKnob,
        typer.Option(
            help="group_size, concurrency, or joint (both, and a power cap as a last resort)."
        ),
    ] = ControlKnob.group_size,
    steps: Annotated[int, typer.Option(min=1, help="Control periods to train on.")] = 500,
    seed: Annotated[int, typer.Option(min=0, help="Seed of training.")] = 0,
    seeds: Annotated[
        int, typer.Option(min=1, help="Train this many seeds; keep the validation's choice.")
    ] = 1,
    target: Annotated[str, typer.Option(help="Violation share allowed at 0.5 s.")] = "3%",
    w_tokens: Annotated[
        float, typer.Option(callback=opt.number_range(0), help="Reward weight of tokens.")
    ] = 1.0,
    w_violation: Annotated[
        float, typer.Option(callback=opt.number_range(0), help="Weight of excess energy.")
    ] = 2.0,
    w_target: Annotated[
        float,
        typer.Option(callback=opt.number_range(0), help="Weight of violations beyond the target."),
    ] = 10.0,
    w_switch: Annotated[
        float, typer.Option(callback=opt.number_range(0), help="Cost of a knob change.")
    ] = 0.01,
    shield: Annotated[
        bool,
        typer.Option(
            "--shield/--no-shield",
            help="While recent violations exceed the target: no step up, and a step down "
            "after a period over it (trained and run so).",
        ),
    ] = True,
    drift: Annotated[str, typer.Option(help="sim: response lengths: none or grpo.")] = "none",
    time_from: opt.From = None,
    time_to: opt.To = None,
    fill: opt.Fill = "none",
    force: opt.Force = False,
    json_out: opt.Json = False,
) -> None:
    """Train the controller on the simulated job; write the policy."""
    opt.fill_option(fill)  # a bad --fill fails before any work
    cli.refuse_overwrite(out, force, [trace, response])
    opts = cli.options_from(
        TrainOptions,
        locals(),
        budget=parse_power(budget),
        env=env.value,
        knob=knob.value,
        target=parse_percent(target, "--target", positive=True),
        weights=RewardWeights(w_tokens, w_violation, w_target, w_switch),
        period_s=None if period is None else parse_duration(period),
        trace_from=time_from,
        trace_to=time_to,
    )
    trained = [0]

    def update_done(done: int, stats: dict[str, float]) -> None:
        line = f"[{done}/{steps}] reward {stats['reward']:.3f} entropy {stats['entropy']:.3f}"
        advance(done - trained[0], note=line)
        trained[0] = done

    def seed_done(s: int, figures: dict[str, float]) -> None:
        trained[0] = 0
        advance(
            0,
            note=f"seed {s}: validation violations "
            f"{100 * figures['violation_rate_0_5s']:.2f}%, tokens "
            f"{figures['tokens'] / 1e6:.2f} M",
        )

    with progress("training", steps * seeds, quiet=json_out) as advance:
        result = run_training(opts, on_update=update_done, on_seed=seed_done)
    spec = result.spec

    def render(_: TrainResult) -> None:
        where = spec.trace if env == "trace" else preset
        chosen = None if spec.selection is None else spec.selection["kept_seed"]
        kept = (
            "" if chosen is None else f" (seed {chosen} of {seeds}, chosen on the validation jobs)"
        )
        cli.err.print(
            f"wrote {out}: {knob} over {spec.ladder} on {where}, budget {spec.budget_w:g} W{kept}"
        )

    cli.finish(result, json_out, render, warnings=result.warnings)


def render(report: EvalReport) -> None:
    """Print the arms table."""
    out = cli.out_console()
    out.print(report.summary())
    cli.print_table(ARM_COLUMNS, report.arms, out)
    out.print("mean [95 % interval over seeds, Student's t]")


@control_app.command("eval")
@cli.handle_errors
def evaluate(
    policy: Annotated[Path, typer.Option(help="Policy file from control train.")],
    env: Annotated[str | None, typer.Option(help="sim or trace (default: the policy's).")] = None,
    preset: Annotated[str | None, typer.Option(help="sim: preset (default: the policy's).")] = None,
    budget: Annotated[str | None, typer.Option(help="Budget (default: the policy's).")] = None,
    seeds: Annotated[int, typer.Option(min=1, help="Evaluation seeds per arm.")] = 5,
    horizon: Annotated[str, typer.Option(help="Job time per seed.")] = "8h",
    arms: Annotated[str, typer.Option(help="Arms to run.")] = ",".join(ARMS),
    html: opt.Html = None,
    plotly_js: opt.PlotlyJs = "inline",
    fill: Annotated[
        str | None, typer.Option(help="Gap fill of a replayed trace (default: the policy's).")
    ] = None,
    drift: Annotated[
        str | None,
        typer.Option(help="sim: response lengths, none or grpo (default: the policy's)."),
    ] = None,
    trace: Annotated[
        Path | None, typer.Option(help="A trace-trained policy: the trace to replay.")
    ] = None,
    response: Annotated[
        Path | None, typer.Option(help="A trace-trained policy: the sweep of responses.")
    ] = None,
    force: opt.Force = False,
    json_out: opt.Json = False,
) -> None:
    """Run every arm over seeds; report violations at 0.5 s and 30 s, tokens and efficiency."""
    if fill is not None:
        opt.fill_option(fill)  # a bad --fill fails before any work
    page = cli.Page(html, plotly_js, force, [policy, trace, response])
    opts = cli.options_from(
        EvalOptions,
        locals(),
        budget=None if budget is None else parse_power(budget),
        horizon_s=parse_duration(horizon),
        arms=evaluation_arms(arms),
        keep_traces=html is not None,
    )
    said = "choosing the static-safe setting and the hysteresis thresholds..."
    with progress("evaluating", len(opts.arms) * seeds, quiet=json_out) as advance:

        def episode_done(e: Episode) -> None:
            advance(
                note=f"{e.arm} seed {e.seed}: {100 * e.violation_rate_0_5s:.2f}% over "
                f"budget, {e.tokens / 1e6:.2f} M tokens"
            )

        report = run_evaluation(
            opts, episode_done, None if json_out else lambda: cli.err.print(said)
        )
    gpus = report.episodes[0].gpus if report.episodes else 1
    page.write("powerkit control eval", lambda: [control_section(report, gpus)])
    cli.finish(report, json_out, render, written=[html])


@control_app.command("run")
@cli.handle_errors
def run(
    policy: Annotated[Path, typer.Option(help="Policy file from control train.")],
    backend: Annotated[ControlBackend, typer.Option(help="nvml: GPUs here.")] = ControlBackend.nvml,
    actuator: opt.Actuator = None,
    budget: Annotated[str | None, typer.Option(help="Budget (default: the policy's).")] = None,
    period: Annotated[str, typer.Option(help="Control period.")] = "60s",
    duration: Annotated[
        str | None, typer.Option(help="How long to run (default: until Ctrl-C).")
    ] = None,
    interval: Annotated[str, typer.Option(help="Power sampling interval.")] = "0.5s",
    tokens_from: opt.TokensFrom = None,
    fallback: Annotated[
        int | None, typer.Option(help="Safe knob setting (default: the lowest).")
    ] = None,
    hard_margin: Annotated[str, typer.Option(help="Fall back above budget + this.")] = "10%",
    hard_periods: Annotated[int, typer.Option(min=1, help="... for this many periods.")] = 3,
    gpus: opt.Gpus = None,
    seed: Annotated[int, typer.Option(min=0, help="sim: seed of the simulated job.")] = 0,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Record the run (Parquet).")
    ] = None,
    force: opt.Force = False,
    json_out: opt.Json = False,
) -> None:
    """Run the policy in the loop: read power, write knobs, fall back when unsafe."""
    if out is not None:
        cli.refuse_overwrite(out, force, [policy])
    opts = cli.options_from(
        RunOptions,
        locals(),
        backend=Backend(backend),
        budget=None if budget is None else parse_power(budget),
        period_s=parse_duration(period),
        duration_s=None if duration is None else parse_duration(duration),
        interval_s=parse_duration(interval),
        gpus=parse_gpus(gpus),
        hard_margin=parse_percent(hard_margin, "--hard-margin"),
    )

    def show(d: Decision, knob: str) -> None:
        if not json_out:
            cli.err.print(d.describe(knob))

    cli.finish(run_policy(opts, on_decision=show), json_out, lambda r: cli.err.print(r.summary()))
