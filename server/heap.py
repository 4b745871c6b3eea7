"""The broker's long-lived objects and CPython's cyclic garbage collector.

A full collection visits every object the collector tracks, and stops every connection while it
does: with what startup loads it took 15-25 ms every few tens of seconds under load, and about
300 ms once 10,000 partitions had been created (some 40 tracked objects each: the log, its
segment, indexes, paths, locks, lists). What startup loads and the partitions a topic creation
opens live as long as the broker, so they are frozen (gc.freeze) once made: later collections
skip them. The cost: cyclic garbage that later forms among objects alive at a freeze (requests in
flight then) is never reclaimed; freezes are rare (startup, topic and partition creation).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def freeze_long_lived_objects() -> None:
    """Collect what is garbage now, then keep every survivor out of later collections."""
    gc.collect()
    gc.freeze()


@contextmanager
def making_long_lived_objects() -> Iterator[None]:
    """A block that makes objects as long-lived as the broker: no collection runs inside it (each
    would scan the growing heap again: a third of the time creating 10,000 partitions), and what it
    made is frozen once it succeeds."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
    freeze_long_lived_objects()
