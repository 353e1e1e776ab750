"""A utility's limits on a site's power swings (a TOML file), judged against grid metrics.

```toml
name = "An example interconnection"
source = "where these limits come from"

[[rule]]
metric = "ramp"            # the largest change over interval_s, at site scale
interval_s = 1.0
limit_mw_per_s = 10.0
source = "..."

[[rule]]
metric = "dynamic_range"   # max - min of 1 s means within each period, at site scale
period_s = 60.0
limit_pct_of_mean = 15.0   # or limit_mw

[[rule]]
metric = "band"            # the strongest sinusoid in the band, at site scale
low_hz = 0.1
high_hz = 1.0
limit_mw = 1.5             # or limit_pct_of_mean
```

Each rule gives ``value``, ``pass`` and ``margin`` (limit − value: positive is headroom). A
rule the series cannot judge (a band above its Nyquist frequency, a ramp shorter than its
sampling interval) fails, saying so: a limit that cannot be checked is not met.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from powerkit.core.errors import BadInputError, option
from powerkit.core.inputs import bundled_or_given, load_toml
from powerkit.utility.metrics import BANDS, DYNAMIC_PERIODS_S, RAMP_INTERVALS_S, SwingMetrics

__all__ = ["BUNDLED", "Rule", "RuleResult", "Spec", "bundled_specs", "judge", "read_spec"]

_METRICS = ("ramp", "dynamic_range", "band")


@dataclass(frozen=True)
class Rule:
    metric: str
    limit: float
    unit: str  # "MW/s", "MW" or "% of mean"
    interval_s: float | None = None
    period_s: float | None = None
    low_hz: float | None = None
    high_hz: float | None = None
    source: str = ""

    @property
    def name(self) -> str:
        if self.metric == "ramp":
            return f"ramp over {self.interval_s:g} s"
        if self.metric == "dynamic_range":
            return f"dynamic range within {self.period_s:g} s"
        return f"band {self.low_hz:g}-{self.high_hz:g} Hz"


@dataclass(frozen=True)
class Spec:
    name: str
    source: str
    rules: tuple[Rule, ...]
    path: str = ""


@dataclass(frozen=True)
class RuleResult:
    """One rule of a spec, judged."""

    rule: str
    limit: float
    unit: str
    value: float | None
    passed: bool = field(metadata={"key": "pass"})
    margin: float | None
    note: str = ""


BUNDLED = Path(__file__).resolve().parents[1] / "data" / "utility_specs"


def bundled_specs() -> list[str]:
    """The names of the example specs that ship with powerkit (``--spec NAME``)."""
    return sorted(p.stem for p in BUNDLED.glob("*.toml"))


def read_spec(path: Path) -> Spec:
    """Read and check a spec TOML (a path, or the name of a bundled example); one line naming
    the rule for anything wrong."""
    path = bundled_or_given(path, BUNDLED)
    doc = load_toml(Path(path), option("spec"))
    rules = []
    for k, raw in enumerate(doc.get("rule", []), start=1):
        where = f"{path}: rule {k}"
        if not isinstance(raw, dict) or raw.get("metric") not in _METRICS:
            raise BadInputError(f"{where}: metric must be one of {', '.join(_METRICS)}")
        rules.append(_rule(raw, where))
    if not rules:
        raise BadInputError(f"{path}: no [[rule]] tables")
    return Spec(
        str(doc.get("name", Path(path).stem)), str(doc.get("source", "")), tuple(rules), str(path)
    )


def _rule(raw: dict[str, Any], where: str) -> Rule:
    metric = raw["metric"]
    limits = {k: raw[k] for k in ("limit_mw_per_s", "limit_mw", "limit_pct_of_mean") if k in raw}
    allowed = {
        "ramp": ("limit_mw_per_s", "limit_pct_of_mean"),
        "dynamic_range": ("limit_mw", "limit_pct_of_mean"),
        "band": ("limit_mw", "limit_pct_of_mean"),
    }[metric]
    if len(limits) != 1 or next(iter(limits)) not in allowed:
        raise BadInputError(f"{where}: give one of {', '.join(allowed)}")
    key, limit = next(iter(limits.items()))
    unit = {"limit_mw_per_s": "MW/s", "limit_mw": "MW", "limit_pct_of_mean": "% of mean"}[key]
    try:
        limit = float(limit)
        fields = {
            k: float(raw[k]) for k in ("interval_s", "period_s", "low_hz", "high_hz") if k in raw
        }
    except (TypeError, ValueError):
        raise BadInputError(f"{where}: limits and intervals must be numbers") from None
    if not all(math.isfinite(v) for v in (limit, *fields.values())):
        raise BadInputError(
            f"{where}: limits and intervals must be finite (an inf limit passes every series)"
        )
    need = {"ramp": ("interval_s",), "dynamic_range": ("period_s",), "band": ("low_hz", "high_hz")}[
        metric
    ]
    missing = [k for k in need if k not in fields]
    if missing or limit <= 0 or any(v <= 0 for v in fields.values()):
        raise BadInputError(f"{where}: needs positive {', '.join(need)} and a positive limit")
    if metric == "band" and (fields["low_hz"], fields["high_hz"]) not in BANDS:
        bands = ", ".join(f"{lo:g}-{hi:g}" for lo, hi in BANDS)
        raise BadInputError(f"{where}: band rules use the bands {bands} Hz")
    if metric == "ramp" and fields["interval_s"] not in RAMP_INTERVALS_S:
        known = ", ".join(f"{d:g}" for d in RAMP_INTERVALS_S)
        raise BadInputError(f"{where}: ramp rules use the intervals {known} s")
    if metric == "dynamic_range" and fields["period_s"] not in DYNAMIC_PERIODS_S:
        raise BadInputError(f"{where}: dynamic range rules use periods of 60 or 3600 s")
    return Rule(metric, limit, unit, source=str(raw.get("source", "")), **fields)


def judge(spec: Spec, m: SwingMetrics) -> list[RuleResult]:
    """Each rule of ``spec`` against the site-scale metrics ``m``."""
    return [_judge(rule, m) for rule in spec.rules]


def _judge(rule: Rule, m: SwingMetrics) -> RuleResult:
    value, note = None, ""
    if rule.metric == "ramp":
        found = [r for r in m.ramps if abs(r.interval_s - (rule.interval_s or 0)) < 1e-9]
        if found and found[0].resolved and found[0].max_w is not None:
            r = found[0]
            value = r.site_mw_per_s if rule.unit == "MW/s" else r.max_pct_of_mean
        else:
            note = f"no ramp over {rule.interval_s:g} s in this series (sampled every {m.dt_s:g} s)"
    elif rule.metric == "dynamic_range":
        found_r = [r for r in m.dynamic_range if abs(r.period_s - (rule.period_s or 0)) < 1e-9]
        if found_r and found_r[0].max_w is not None:
            r2 = found_r[0]
            value = r2.site_mw if rule.unit == "MW" else r2.max_pct_of_mean
        else:
            note = (
                f"no dynamic range within {rule.period_s:g} s: "
                f"{found_r[0].note if found_r else 'not measured'}"
            )
    else:
        found_b = [
            b
            for b in m.bands
            if abs(b.low_hz - (rule.low_hz or 0)) < 1e-9
            and abs(b.high_hz - (rule.high_hz or 0)) < 1e-9
        ]
        amplitude = found_b[0].peak_amplitude_w if found_b and found_b[0].resolved else None
        if amplitude is not None:
            b = found_b[0]
            share = 100 * amplitude / m.mean_w if m.mean_w > 0 else None
            value = b.site_peak_amplitude_mw if rule.unit == "MW" else share
            if b.attenuated:
                note = "averaged power: a lower bound"
        else:
            note = "band not resolved by this series' sampling"
    if value is None:
        return RuleResult(
            rule.name, rule.limit, rule.unit, None, False, None, note or "not measured"
        )
    return RuleResult(
        rule.name, rule.limit, rule.unit, value, value <= rule.limit, rule.limit - value, note
    )
