"""The fleet the jobs tests account (tests/jobs/test_attribution.py's docstring)."""

from __future__ import annotations

from pathlib import Path

import pytest

T0 = 1_767_600_000  # 2026-01-05T08:00:00Z


def iso(offset: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(T0 + offset, UTC).isoformat()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fleet") / "fleet.csv"
    lines = ["ts,host,gpu,power_w"]
    for host, base in (("n1", 100), ("n2", 200)):
        for gpu in range(4):
            for t in range(601):
                if host == "n1" and gpu == 3 and 300 < t < 360:
                    continue
                lines.append(f"{T0 + t},{host},{gpu},{base + 10 * gpu}")
    path.write_text("\n".join(lines) + "\n")
    return path
