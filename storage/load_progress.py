"""Progress of the logs a broker loads at startup, for the operator watching a long recovery.

After an unclean shutdown every log of a directory is loaded, recovering its unflushed segments:
with thousands of partitions that takes minutes. Kafka's LogManager logs each completed load
("... (N/M completed in DIR)") and then "Loaded M logs in T ms"; here one line every few seconds
says how many are done, how long it has taken and how long the rest should take, so a start with
ten thousand partitions neither floods the log nor goes quiet.

Counted once per log, never per segment or record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

PROGRESS_INTERVAL_S = 5.0

log = logging.getLogger("samsa.storage")


class LoadProgress:
    def __init__(self, log_dir: Path, total: int, *, interval_s: float = PROGRESS_INTERVAL_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.log_dir = log_dir
        self.total = total
        self.done = 0
        self._interval_s = interval_s
        self._monotonic = monotonic
        self._started = self._last_report = monotonic()

    def completed(self) -> None:
        """One more log loaded: a progress line if the last one is `interval_s` old."""
        self.done += 1
        now = self._monotonic()
        if now - self._last_report >= self._interval_s and self.done < self.total:
            self._last_report = now
            elapsed = now - self._started
            eta = elapsed / self.done * (self.total - self.done)
            log.info("Loading logs in %s: %d/%d completed, %.1fs elapsed, ETA %.1fs",
                     self.log_dir, self.done, self.total, elapsed, eta)

    def finished(self) -> None:
        elapsed_ms = (self._monotonic() - self._started) * 1000
        log.info("Loaded %d logs in %dms from %s", self.done, elapsed_ms, self.log_dir)
