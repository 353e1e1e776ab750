"""A GPU load for the device checks: fp16 8192² matrix products for ``SECONDS`` (or until
SIGTERM), then one JSON line ``{"tokens": products, "seconds": s}`` as ``sweep --backend cmd``
reads it.

    python bench/device_load.py SECONDS [GPU]
"""

from __future__ import annotations

import json
import signal
import sys
import time


def main() -> int:
    seconds = float(sys.argv[1])
    gpu = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    stopped = False

    def stop(*_: object) -> None:
        nonlocal stopped
        stopped = True

    signal.signal(signal.SIGTERM, stop)
    import torch

    dev = torch.device(f"cuda:{gpu}")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
    b = torch.randn_like(a)
    torch.cuda.synchronize(dev)
    start = time.monotonic()
    n = 0
    while not stopped and time.monotonic() - start < seconds:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize(dev)
        n += 10
    print(json.dumps({"tokens": n, "seconds": round(time.monotonic() - start, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
