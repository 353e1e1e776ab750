"""A record-batch reader read ahead in a thread: the scan of the next batches overlaps the
work on the current one (cells/grid.py's scans)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator

import pyarrow as pa

__all__ = ["prefetch"]


def prefetch(reader: pa.RecordBatchReader, depth: int = 2) -> Generator[pa.RecordBatch]:
    """Yield the reader's batches, scanning the next ones in a thread meanwhile.

    DuckDB releases the GIL while it scans, so the scan of batch i+1 overlaps the NumPy work
    on batch i.
    """
    done = object()
    batches: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(item: object) -> bool:
        while not stop.is_set():
            try:
                batches.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False  # the consumer has gone

    def produce() -> None:
        try:
            for batch in reader:
                if not offer(batch):
                    return
            offer(done)
        except BaseException as exc:  # handed to the consumer, raised there
            offer(exc)

    worker = threading.Thread(target=produce, daemon=True)
    worker.start()
    try:
        while True:
            item = batches.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join()
        reader.close()  # frees the connection for the next query (e.g. a sorted rescan)
