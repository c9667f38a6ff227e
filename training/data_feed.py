"""Batches prepared ahead of the training step, in a background thread.

The step loop's forward and backward run in CUDA kernels that release the GIL, so a
thread that reads, decodes and packs the next batches meanwhile takes the data off the
GPU's critical path without the start-up cost and copies of worker processes. With
ahead = 0 it is the plain iterator (the CPU tests' deterministic path; the order is the
same either way: one producer, a FIFO queue).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

_END = object()


class Prefetcher:
    """Iterate `source` with up to `ahead` items produced in advance by one thread; an
    exception in the producer is raised in the consumer at the item where it happened."""

    def __init__(self, source: Iterator[Any], ahead: int = 0):
        self.source, self.ahead = source, ahead
        self._stop = threading.Event()
        self._queue: queue.Queue | None = None
        if ahead > 0:
            self._queue = queue.Queue(maxsize=ahead)
            self._thread = threading.Thread(target=self._produce, name="batch-prefetch", daemon=True)
            self._thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for item in self.source:
                if not self._put((item, None)):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            self._put((None, exc))
            return
        self._put((_END, None))

    def __iter__(self):
        return self

    def __next__(self):
        if self._queue is None:
            return next(self.source)
        item, exc = self._queue.get()
        if exc is not None:
            raise exc
        if item is _END:
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop the producer thread (it ends at its next put) and wait for it."""
        self._stop.set()
        if self._queue is not None:
            self._thread.join(timeout=30)
