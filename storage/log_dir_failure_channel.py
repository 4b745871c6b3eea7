"""Kafka's LogDirFailureChannel: the one place an I/O failure of a log directory is reported, by
whatever thread met it (an append on the event loop, a flush, a checkpoint, the cleaner). The
first report of a directory takes it offline for good, until a restart: what reached its disk is
no longer known, so nothing in it is read or written again (the partitions answer
KAFKA_STORAGE_ERROR, DescribeLogDirs names the directory with that error).

Kafka logs every report at ERROR; here only the first of a directory is (the later ones, from
work already under way when it failed, at DEBUG): a full disk is logged once, not per request."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("samsa.storage")


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._offline: set[Path] = set()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[Path], None]] = []

    def add_listener(self, listener: Callable[[Path], None]) -> None:
        """`listener(log_dir)` runs once per directory, in the thread that reported it first."""
        self._listeners.append(listener)

    def has_offline_log_dir(self, log_dir: Path) -> bool:
        return log_dir in self._offline

    @property
    def offline_log_dirs(self) -> frozenset[Path]:
        return frozenset(self._offline)

    def maybe_add_offline_log_dir(self, log_dir: Path, message: str, error: BaseException | None = None) -> None:
        with self._lock:
            first = log_dir not in self._offline
            self._offline.add(log_dir)
        if not first:
            log.debug("%s (log dir %s already offline): %s", message, log_dir, error)
            return
        log.error("%s", message, exc_info=error)
        for listener in self._listeners:
            listener(log_dir)
