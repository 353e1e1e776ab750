"""Train a controller and judge it against the baselines: the library behind `powerkit control`."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from powerkit.control.baselines import (
    Arm,
    shield_policy,
)
from powerkit.control.env import (
    DEFAULT_TARGET,
    KNOB_NAMES,
    OBS_SPEC,
    POWER_OBS,
    RewardWeights,
    SimEnv,
)
from powerkit.control.evaluate import (
    ControlEnv,
    run_episode,
)
from powerkit.control.ppo import PPO, PPOConfig
from powerkit.control.trace_env import TraceEnv
from powerkit.core.documents import Document, from_plain
from powerkit.core.errors import BadInputError, option
from powerkit.core.jsonable import to_plain
from powerkit.core.outputs import unfinished_path
from powerkit.core.schemas import field_properties
from powerkit.sim.presets import PRESETS, get_preset
from powerkit.sim.settings import DRIFTS, Knobs
from powerkit.sweep.plan import KNOB_MAX
from powerkit.telemetry.recorder import stop_on_signals
from powerkit.trace import read_trace

__all__ = [
    "VALIDATION_SEEDS",
    "TrainResult",
    "env_factory",
    "load_policy",
    "nameplate_w",
    "train_policy",
    "train_seeds",
    "validate",
]


@dataclass
class TrainSpec:
    """What a policy was trained on; stored in the policy file and checked on load."""

    env: str
    preset: str
    budget_w: float
    knob: str
    ladder: list[int]
    target: float
    weights: dict[str, float]
    obs_spec: list[str]
    steps: int
    seed: int
    trace: str | None = None  # env "trace": the recorded trace and the sweep of responses
    response: str | None = None
    period_s: float | None = None
    trace_from: str | None = None  # env "trace": the slice of the trace replayed (--from/--to)
    trace_to: str | None = None
    fill: str = "none"  # env "trace": the gap fill of the replayed trace
    completed_steps: int | None = None  # fewer than ``steps`` when training was interrupted
    #: with ``--seeds N``: every trained seed's validation figures and the one kept
    selection: dict[str, Any] | None = None
    #: ``--knob joint``: each rung's group size, concurrency and power cap (W or None)
    settings: list[dict[str, Any]] | None = None
    #: trained (and so run) with the violation shield (``env.shielded``); False in files
    #: written before it existed
    shield: bool = False
    #: env "trace": the per-GPU nameplate of the trace trained on (what an ``80%`` budget of
    #: eval or run resolves against, without opening the file again)
    nameplate_w: float | None = None
    #: tokens per second of the job at the top rung, uncontrolled: what the observation's
    #: token rate is a share of (``control run`` needs it; None in files written before it
    #: was stored, where it is computed again from the training conditions)
    tokens_ref: float | None = None
    #: env "sim": the response-length drift trained on ("none" in files written before it)
    drift: str = "none"


@dataclass(frozen=True)
class TrainResult(Document):
    """What ``powerkit control train`` reports: the policy file written and what it was
    trained on (the spec's fields, flat in the document)."""

    COMMAND: ClassVar[str] = "control train"

    out: str
    spec: TrainSpec

    @property
    def warnings(self) -> list[str]:
        """What the user must know: a training stopped before its steps (kept apart)."""
        done = self.spec.completed_steps
        if done is None:
            return []
        kept = unfinished_path(Path(self.out))
        return [
            f"training interrupted after {done} of {self.spec.steps} steps; the policy so "
            f"far is saved in {kept} ({self.out} is untouched)"
        ]

    @classmethod
    def schema_body(cls, defs: dict[str, Any]) -> dict[str, Any]:
        """The schema of :meth:`body` (docs/schemas/): ``out``, then the spec's fields."""
        properties, required = field_properties(TrainSpec, defs)
        return {
            "properties": {"out": {"type": "string"}, **properties},
            "required": ["out", *required],
        }

    def body(self) -> dict[str, Any]:
        """``out``, then the spec's fields."""
        return {"out": self.out, **to_plain(self.spec)}

    @classmethod
    def from_body(cls, doc: dict[str, Any]) -> TrainResult:
        """The result a document holds (the spec gathered from its fields)."""
        names = {f.name for f in dataclasses.fields(TrainSpec)}
        spec = from_plain(TrainSpec, {k: v for k, v in doc.items() if k in names}, "document")
        return cls(from_plain(_Out, doc, "document").out, spec)


@dataclass(frozen=True)
class _Out:
    out: str


#: training episodes of a drifting job start at a training step drawn from [0, this)
DRIFT_STARTS = 1000

# Save the policy so far every this many PPO updates (of 50 steps each).
_CHECKPOINT_UPDATES = 10


def nameplate_w(env: str, preset: str | None, trace: str | Path | None) -> float | None:
    """The per-GPU nameplate a budget such as ``80%`` resolves against: the recorded trace's
    for ``env`` "trace" (None when it does not say), else the preset's. ``trace`` is a path
    the user named (never one read from a policy file)."""
    if env == "trace" and trace:
        return read_trace(trace).meta.nameplate_w()  # metadata only: no slice needed
    return get_preset(preset or "a100-7b").tdp_w


def spec_nameplate_w(spec: TrainSpec) -> float | None:
    """The nameplate of what ``spec`` was trained on, from the policy itself."""
    if spec.env == "trace":
        return spec.nameplate_w
    return get_preset(spec.preset or "a100-7b").tdp_w


def with_inputs(spec: TrainSpec, trace: Path | None, response: Path | None) -> TrainSpec:
    """``spec`` replaying the trace and response the user names. A policy records the paths it
    was trained on but is never trusted to name files to open: a trace-trained policy needs
    both named again (they may be elsewhere now)."""
    if spec.env != "trace":
        if trace is not None or response is not None:
            raise BadInputError(
                f"{option('trace')}/{option('response')}: this policy was trained on the simulator"
            )
        return spec
    if trace is None or response is None:
        raise BadInputError(
            f"this policy was trained on the trace {spec.trace} with the responses "
            f"{spec.response}: name them with {option('trace')} and {option('response')} (a "
            "policy file names "
            "no file for powerkit to open)"
        )
    return dataclasses.replace(spec, trace=str(trace), response=str(response))


def env_factory(
    spec: TrainSpec, episode_steps: int = 10**6, fill: str = "none"
) -> Callable[[], ControlEnv]:
    """Fresh environments like the one ``spec`` was trained on (sim or trace); ``fill`` is the
    gap fill of a replayed trace (a simulated job has no gaps)."""
    weights = RewardWeights(**spec.weights)
    if spec.env == "trace":
        assert spec.trace and spec.response
        trace, response = spec.trace, spec.response
        base = TraceEnv(
            trace,
            response,
            spec.budget_w,
            spec.knob,
            period_s=spec.period_s or 60,
            episode_steps=episode_steps,
            weights=weights,
            target=spec.target,
            fill=fill,
            time_from=spec.trace_from,
            time_to=spec.trace_to,
        )

        def replay() -> ControlEnv:
            return dataclasses.replace(base, keep_periods=False)

        return replay
    preset = get_preset(spec.preset)

    joint = tuple(Knobs(**k) for k in spec.settings or [])

    def make() -> ControlEnv:
        return SimEnv(
            preset,
            spec.budget_w,
            spec.knob,
            tuple(spec.ladder),
            episode_steps,
            weights,
            target=spec.target,
            joint=joint,
            drift=spec.drift,
            period_s=spec.period_s,
        )

    return make


def train_policy(
    preset: str | None,
    budget_w: float,
    knob: str,
    out: Path,
    *,
    steps: int = 500,
    seed: int = 0,
    target: float = DEFAULT_TARGET,
    weights: RewardWeights | None = None,
    episode_steps: int = 50,
    trace: Path | None = None,
    response: Path | None = None,
    period_s: float | None = None,
    on_update: Callable[[int, dict[str, float]], None] | None = None,
    trace_from: str | None = None,
    trace_to: str | None = None,
    fill: str = "none",
    shield: bool = True,
    drift: str = "none",
) -> TrainSpec:
    """Train PPO for ``steps`` control periods on the simulated job (its response lengths
    drifting as ``drift`` says; ``period_s``: a fixed control period for the concurrency
    knob, None a GRPO step), or on a recorded trace replayed through a sweep's response
    (``trace`` and ``response``; ``period_s`` default 60 s); write ``out``."""
    env: ControlEnv
    if trace is not None and response is not None:
        period_s = period_s or 60.0
        env = TraceEnv(
            str(trace),
            str(response),
            budget_w,
            knob,
            period_s=period_s,
            episode_steps=episode_steps,
            weights=weights or RewardWeights(),
            target=target,
            fill=fill,
            time_from=trace_from,
            time_to=trace_to,
        )
    else:
        env = SimEnv(
            get_preset(preset or "a100-7b"),
            budget_w,
            knob,
            episode_steps=episode_steps,
            weights=weights or RewardWeights(),
            target=target,
            drift=drift,
            period_s=period_s,
            drift_starts=DRIFT_STARTS,
        )
    spec = TrainSpec(
        "sim" if trace is None else "trace",
        preset or "",
        budget_w,
        knob,
        list(env.ladder),
        target,
        asdict(env.weights),
        list(env.obs_names),
        steps,
        seed,
        None if trace is None else str(trace),
        None if response is None else str(response),
        period_s,
        trace_from if trace is not None else None,
        trace_to if trace is not None else None,
        fill if trace is not None else "none",
    )
    if isinstance(env, SimEnv) and env.settings:
        spec.settings = [asdict(k) for k in env.settings]
    if isinstance(env, SimEnv):
        spec.drift = env.drift
    if trace is not None:
        spec.nameplate_w = nameplate_w("trace", None, trace)
    spec.tokens_ref = float(env.tokens_ref)
    env.shield = spec.shield = shield
    agent = PPO(
        env.obs_dim, env.n_actions, PPOConfig(seed=seed, rollout=50, minibatch=25, epochs=10)
    )
    updates = [0]

    def update(done: int, stats: dict[str, float]) -> None:
        updates[0] += 1
        if on_update:
            on_update(done, stats)
        if updates[0] % _CHECKPOINT_UPDATES == 0 and done < steps:
            # A checkpoint beside the final path: a kill loses at most the updates since, and
            # ``out`` keeps any earlier policy until this one is whole.
            spec.completed_steps = done
            agent.save(partial, {"train": asdict(spec)})

    partial = unfinished_path(out)
    stop = threading.Event()
    with stop_on_signals(stop):
        done = agent.learn(env, steps, update, stop)
    spec.completed_steps = None if done >= steps else done
    agent.save(out if done >= steps else partial, {"train": asdict(spec)})
    if done >= steps:
        Path(partial).unlink(missing_ok=True)
    return spec


#: validation jobs (seeds) for choosing among training seeds: never the evaluation seeds 1000+
VALIDATION_SEEDS = (2000, 2001, 2002)


def validate(agent: PPO, spec: TrainSpec, horizon_s: float) -> dict[str, float]:
    """The policy on the validation jobs: mean 0.5 s violation rate and tokens."""
    make = env_factory(spec, fill=spec.fill)
    arm = ppo_arm(agent, spec)
    episodes = [run_episode(make, arm, s, horizon_s) for s in VALIDATION_SEEDS]
    return {
        "violation_rate_0_5s": float(np.mean([e.violation_rate_0_5s for e in episodes])),
        "tokens": float(np.mean([e.tokens for e in episodes])),
    }


def train_seeds(
    seeds: int,
    out: Path,
    *,
    seed: int = 0,
    validation_s: float = 2 * 3600,
    on_seed: Callable[[int, dict[str, float]], None] | None = None,
    **train: Any,
) -> TrainSpec:
    """Train ``seeds`` policies (seeds ``seed``, ``seed`` + 1, ...) and keep, at ``out``, the
    one the validation jobs prefer: the most tokens among those whose violation rate is under
    the target, else the fewest violations. The evaluation seeds are never used to choose."""
    trained = []
    for k in range(seeds):
        path = out.with_name(f".{out.stem}.seed{seed + k}{out.suffix}")
        spec = train_policy(out=path, seed=seed + k, **train)
        agent, _ = load_policy(path)
        figures = validate(agent, spec, validation_s)
        trained.append((seed + k, path, spec, figures))
        if on_seed is not None:
            on_seed(seed + k, figures)
    target = trained[0][2].target

    def preference(item: tuple[int, Path, TrainSpec, dict[str, float]]) -> tuple[int, float]:
        f = item[3]
        ok = f["violation_rate_0_5s"] <= target
        return (1, f["tokens"]) if ok else (0, -f["violation_rate_0_5s"])

    best = max(trained, key=preference)
    agent, spec = load_policy(best[1])
    spec.selection = {
        "validation_seeds": list(VALIDATION_SEEDS),
        "validation_s": validation_s,
        "kept_seed": best[0],
        "seeds": [{"seed": s, **f} for s, _, _, f in trained],
    }
    agent.save(out, {"train": asdict(spec)})
    for _, path, _, _ in trained:
        path.unlink(missing_ok=True)
    return spec


def ppo_arm(agent: PPO, spec: TrainSpec) -> Arm:
    """The policy as an evaluation arm: greedy, and shielded if it was trained so."""

    features = len(spec.obs_spec)  # a prefix of what the environment observes

    def greedy(obs: np.ndarray) -> int:
        return agent.act(obs[:features], greedy=True)

    return Arm("ppo", shield_policy(greedy, spec.target) if spec.shield else greedy)


def load_policy(path: Path) -> tuple[PPO, TrainSpec]:
    """Return a policy and what it was trained on; refuses mismatched files."""
    agent, header = PPO.load(path)
    try:
        spec = TrainSpec(**header["train"])
    except (KeyError, TypeError) as exc:
        raise BadInputError(f"{path}: not a powerkit control policy ({exc})") from None
    # Trained on every feature, or (on a replayed trace, or before the length features
    # existed) on the power features alone: both run, on the features they know.
    known = spec.obs_spec in (list(OBS_SPEC), list(POWER_OBS))
    if not known or agent.obs_dim != len(spec.obs_spec):
        raise BadInputError(f"{path}: trained on another observation ({spec.obs_spec})")
    if agent.n_actions != 3:
        raise BadInputError(f"{path}: expects {agent.n_actions} actions, not down/hold/up")
    _check_spec(path, spec)
    return agent, spec


def _settings_valid(settings: object) -> bool:
    """A joint ladder's rungs as a policy file stores them: each a group size and a
    concurrency within the simulator's range, a cap in W or none, a clock in MHz or none."""

    def count(v: object, knob: str) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= KNOB_MAX[knob]

    def level(v: object) -> bool:  # (a NaN fails the comparison)
        return v is None or (
            isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 1e5
        )

    return (
        isinstance(settings, list)
        and 1 <= len(settings) <= 256
        and all(
            isinstance(k, dict)
            and set(k) <= {"group_size", "concurrency", "power_cap_w", "gpu_frequency_mhz"}
            and count(k.get("group_size"), "group_size")
            and count(k.get("concurrency"), "concurrency")
            and level(k.get("power_cap_w"))
            and level(k.get("gpu_frequency_mhz"))
            for k in settings
        )
    )


def _check_spec(path: Path, spec: TrainSpec) -> None:
    """Refuse a policy whose recorded training is not one powerkit could have run: every
    number finite and in range (a tampered file must not run silently)."""

    def bad(what: str) -> BadInputError:
        return BadInputError(f"{path}: not a valid policy ({what})")

    def finite(x: object) -> bool:
        return isinstance(x, int | float) and not isinstance(x, bool) and np.isfinite(x)

    if spec.env not in ("sim", "trace"):
        raise bad(f"env {spec.env!r}")
    if spec.knob not in KNOB_NAMES:
        raise bad(f"knob {spec.knob!r}, not one of {', '.join(KNOB_NAMES)}")
    if spec.env == "sim" and spec.preset not in PRESETS:
        raise bad(f"preset {spec.preset!r}, which the simulator does not have")
    if spec.env == "trace" and (
        spec.obs_spec != list(POWER_OBS)
        or not all(isinstance(f, str) and f for f in (spec.trace, spec.response))
    ):
        raise bad("a replayed trace's policy with the simulator's observation or no trace named")
    if spec.settings is not None and not _settings_valid(spec.settings):
        raise bad("joint settings")
    if spec.drift not in DRIFTS:
        raise bad(f"drift {spec.drift!r}")
    if spec.tokens_ref is not None and (not finite(spec.tokens_ref) or spec.tokens_ref <= 0):
        raise bad(f"tokens_ref {spec.tokens_ref!r}")
    if not finite(spec.budget_w) or not 0 < spec.budget_w <= 100_000:
        raise bad(f"budget {spec.budget_w!r} W")
    if not finite(spec.target) or not 0 < spec.target < 1:
        raise bad(f"target {spec.target!r}")
    if not isinstance(spec.ladder, list) or not 1 <= len(spec.ladder) <= 256:
        raise bad("ladder")
    if not all(finite(v) and v >= 0 for v in spec.ladder):
        raise bad("ladder values")
    if not isinstance(spec.weights, dict) or not all(finite(v) for v in spec.weights.values()):
        raise bad("reward weights")
    if spec.period_s is not None and (not finite(spec.period_s) or spec.period_s <= 0):
        raise bad(f"period {spec.period_s!r} s")
    if spec.env == "sim" and spec.period_s is not None and spec.knob != "concurrency":
        raise bad(f"a period within the step for {spec.knob}")
    if spec.nameplate_w is not None and (not finite(spec.nameplate_w) or spec.nameplate_w <= 0):
        raise bad(f"nameplate {spec.nameplate_w!r} W")
    if not isinstance(spec.steps, int) or spec.steps < 0:
        raise bad(f"steps {spec.steps!r}")
