"""Result documents for the consumer tests, written by the producers' own types (``to_doc``),
so that a reader is tested on the documents a command writes, with the figures a test
chooses."""

from __future__ import annotations

from typing import Any

from powerkit.analysis.fleet import FleetReport, FleetWindow
from powerkit.control.evaluate import ArmResult
from powerkit.control.judge import EvalReport
from powerkit.econ.economics import EconReport


def fleet_window(
    window: str,
    window_s: float,
    peak_fraction: float,
    plate: float,
    margin: float = 0.0,
    **given: Any,
) -> FleetWindow:
    """An ``oversub`` window whose peak is ``peak_fraction`` of ``plate`` (every draw)."""
    figures: dict[str, Any] = {
        "cells": max(1, round(window_s / 0.5)),
        "peak_w": peak_fraction * plate,
        "safe_oversubscription": 1 / (peak_fraction * (1 + margin)) if peak_fraction else None,
        "peak_fraction_p50": peak_fraction,
        "peak_fraction_p95": peak_fraction,
        "peak_fraction_max": peak_fraction,
    }
    return FleetWindow(
        window=window, window_s=window_s, peak_fraction=peak_fraction, **{**figures, **given}
    )


def fleet_doc(
    windows: list[tuple[str, float, float]],
    *,
    margin: float = 0.05,
    mean_fraction: float | None = 0.5,
    gpus: int = 4,
    fleet_nameplate_w: float = 2800.0,
    compose: str = "aligned",
    draws: int = 1,
    capacity_w: float | None = None,
    members: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """An ``oversub --json`` document with these (window, seconds, peak fraction) peaks."""
    return FleetReport(
        gpus=gpus,
        nameplate_w=fleet_nameplate_w / gpus,
        fleet_nameplate_w=fleet_nameplate_w,
        compose=compose,
        draws=draws,
        seed=0,
        grid_s=0.5,
        horizon_s=3600.0,
        margin=margin,
        capacity_w=capacity_w,
        mean_fraction=mean_fraction,
        members=members or [],
        windows=[fleet_window(w, s, p, fleet_nameplate_w, margin) for w, s, p in windows],
    ).to_doc()


def _stat(mean: float) -> dict[str, float]:
    return {"mean": mean, "std": 0.0, "ci95_low": mean, "ci95_high": mean}


def arm(
    name: str,
    violations_0_5s: float,
    tokens_per_mwh: float,
    *,
    vs_uncontrolled: float | None = None,
    vs_static_safe: float | None = None,
) -> ArmResult:
    """An arm of ``control eval`` with these means (and changes in tokens per MWh)."""
    return ArmResult(
        name,
        _stat(violations_0_5s),
        _stat(violations_0_5s / 10),
        _stat(1e6),
        _stat(tokens_per_mwh),
        _stat(1e9 / tokens_per_mwh),
        vs_uncontrolled={} if vs_uncontrolled is None else {"tokens_per_mwh": vs_uncontrolled},
        vs_static_safe={} if vs_static_safe is None else {"tokens_per_mwh": vs_static_safe},
    )


def eval_doc(
    arms: list[ArmResult],
    *,
    budget_w: float = 300.0,
    preset: str = "a100-7b",
    seeds: int = 2,
    horizon_s: float = 7200.0,
    target: float = 0.05,
    static_safe: int = 4,
) -> dict[str, Any]:
    """A ``control eval --json`` document with these arms."""
    return EvalReport(
        budget_w, "sim", preset, "group_size", seeds, horizon_s, target, static_safe, arms, []
    ).to_doc()


def econ_doc(
    annual_energy_mwh: float, control: dict[str, float | None] | None = None, gpus: int = 1000
) -> dict[str, Any]:
    """An ``econ --json`` document with this energy per year (and controller saving)."""
    return EconReport(
        window="30s",
        peak_fraction=0.5,
        margin=0.05,
        gpus=gpus,
        gpu_tdp_w=700.0,
        pue=1.2,
        it_kw_nameplate=gpus * 0.7,
        it_kw_oversub=gpus * 0.7 * 0.525,
        provisioned_kw_nameplate=gpus * 0.84,
        provisioned_kw_oversub=gpus * 0.84 * 0.525,
        gpus_deployable_same_feed=int(gpus / 0.525),
        avoided_capex_usd=0.0,
        avoided_capex_usd_per_year=0.0,
        mean_fraction=0.5,
        annual_energy_mwh=annual_energy_mwh,
        annual_energy_cost_usd=0.0,
        control=control,
    ).to_doc()
