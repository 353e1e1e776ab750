"""``jobs --by-label pod`` on a real Prometheus server (Debian's ``prometheus``) holding
DCGM power series labelled by pod, as the DCGM exporter labels them on Kubernetes: per pod,
the same energy as ``info --by pod``, and pods + no pod = the fleet."""

from __future__ import annotations

import pytest

from tests.conftest import Cli
from tests.promserver import backfill, prometheus

T0 = 1_767_600_000  # 2026-01-05T08:00:00Z
SPAN = ("--from", "2026-01-05T08:00:00Z", "--to", "2026-01-05T08:20:00Z")


@pytest.fixture(scope="module")
def pods(tmp_path_factory: pytest.TempPathFactory) -> str:
    """n1's GPU 0 runs pod train-a for 5 minutes then train-b (a new series, as Prometheus
    starts one when a label changes); GPU 1 runs eval; GPU 2 runs no pod; every second."""
    work = tmp_path_factory.mktemp("pods")
    metric = "DCGM_FI_DEV_POWER_USAGE"
    lines = [f"# TYPE {metric} gauge"]
    plan = [
        (0, "train-a", 0, 300, 300.0),
        (0, "train-b", 300, 600, 350.0),
        (1, "eval", 0, 600, 120.0),
    ]
    for gpu, pod, a, b, watts in plan:
        labels = f'{{Hostname="n1",gpu="{gpu}",namespace="ml",pod="{pod}"}}'
        lines += [f"{metric}{labels} {watts + (t % 7)} {T0 + t}.000" for t in range(a, b)]
    labels = '{Hostname="n1",gpu="2"}'
    lines += [f"{metric}{labels} {60 + t % 3} {T0 + t}.000" for t in range(600)]
    lines.append("# EOF")
    (work / "pods.om").write_text("\n".join(lines) + "\n")
    backfill(work / "pods.om", work / "data")
    with prometheus(work, storage=work / "data") as url:
        yield url


def test_jobs_by_pod_equals_info_by_pod(cli: Cli, pods: str) -> None:
    source = f"prometheus+{pods}"
    info = cli.json("info", source, *SPAN, "--by", "pod")
    jobs = cli.json("jobs", source, *SPAN, "--by-label", "pod", "--intensity", "300g/kWh")
    per_pod = {g["value"]: g["energy_j"] for g in info["by"]["groups"] if g["value"] is not None}
    assert set(per_pod) == {"train-a", "train-b", "eval"}
    assert {j["job"]: j["energy_j"] for j in jobs["jobs"]} == pytest.approx(per_pod, rel=1e-12)
    assert jobs["total_j"] == pytest.approx(info["energy_j"], rel=1e-9)
    assert jobs["attributed_j"] + jobs["unattributed_j"] == pytest.approx(jobs["total_j"])
    assert jobs["unattributed_j"] > 0  # GPU 2, with no pod
    eval_ = next(j for j in jobs["jobs"] if j["job"] == "eval")
    assert eval_["co2_kg"] == pytest.approx(eval_["energy_j"] / 3.6e6 * 0.3)
