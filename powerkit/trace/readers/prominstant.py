"""The newest sample of each GPU series now, from an instant query: what ``powerkit top``
polls a Prometheus server for."""

from __future__ import annotations

from powerkit.core.errors import BadInputError
from powerkit.trace.readers.promclient import (
    PromClient,
    answer_samples,
    is_labels,
    series_gpu,
    series_host,
)
from powerkit.trace.readers.prometheus import PromQuery

__all__ = ["instant_samples"]


def instant_samples(
    client: PromClient, metric: str, match: str = ""
) -> list[tuple[tuple[str, int], float, float]]:
    """Each GPU series' newest sample of ``metric`` now (an instant query): ((host, gpu), epoch
    s, value), its shape checked as a range read's is (``powerkit top``, whose
    :class:`~powerkit.top.poll.PollCheck` judges the values)."""
    sel = PromQuery(0.0, 0.0, metric, match).selector(metric)
    data = client.get("query", {"query": sel})
    bad = f"{client.shown}: the answer to {sel!r} is malformed"
    if not isinstance(data, dict) or data.get("resultType") not in ("vector", None):
        raise BadInputError(f"{bad} (not an instant vector)")
    result = data.get("result", [])
    if not isinstance(result, list):
        raise BadInputError(f"{bad} (result is not a list)")
    out = []
    for r in result:
        if not isinstance(r, dict) or not is_labels(r.get("metric", {})):
            raise BadInputError(f"{bad} (a series without a label set)")
        labels = r["metric"]
        if labels.get("gpu") == "all":
            continue
        t, x = answer_samples(client, sel, [r.get("value")])
        out.append(
            ((series_host(labels), series_gpu(client, labels, sel)), float(t[0]), float(x[0]))
        )
    return out
