"""Copying a partition's log into its future log, the replica AlterReplicaLogDirs moves to another
log directory (what Kafka's ReplicaAlterLogDirsThread does, fetching from the local current log).

`catch_up` is one fetch of that thread: first the future log is made a prefix of the current one
(Kafka truncates it by the leader epochs the current log answers, as a follower does against
its leader: the current log may have truncated and taken other records since they were copied;
below the current log's start offset it starts over there), then the batches from its end offset
on, up to `max_bytes`, are read from the current log (up to its log end offset, not its high
watermark) and appended as a follower appends them, their offsets, epochs and producer state
kept. Its log start offset and high watermark follow the current log's.

Threads: `catch_up` may run in a worker thread while the event loop appends to the current log
(a read of the current log takes no lock and sees whole batches only); the future log is only
written by its mover, one call at a time.
"""

from __future__ import annotations

import logging

from .leader_epoch_cache import UNDEFINED_EPOCH
from .log import Log

log = logging.getLogger("samsa.storage")


def truncation_offset(current: Log, future: Log) -> int | None:
    """Where the future log must be cut to be a prefix of the current one (None: it is one, as
    far as the leader epochs tell). Kafka's getOffsetTruncationState: the end of the future log's
    latest epoch in the current log, or, when the current log has an older epoch there, the
    lower of that epoch's ends in both; a current log without epochs bounds it by its end alone."""
    end = future.log_end_offset
    if end > current.log_end_offset:
        end = current.log_end_offset
    latest = future.leader_epoch_cache.latest_epoch
    if latest != UNDEFINED_EPOCH:
        epoch, epoch_end = current.end_offset_for_epoch(latest)
        if epoch == UNDEFINED_EPOCH:
            pass  # the current log knows no epochs (old message formats): its end alone bounds it
        elif epoch != latest:
            _, own_end = future.end_offset_for_epoch(epoch)
            end = min(end, epoch_end, own_end)
        else:
            end = min(end, epoch_end)
    return end if end < future.log_end_offset else None


def catch_up(current: Log, future: Log, max_bytes: int) -> int:
    """Copy up to `max_bytes` (at least one batch) of the current log into the future log;
    returns the bytes copied (0: it had all the current log has)."""
    if future.log_end_offset < current.log_start_offset:
        log.info("The future log of %s ends at %d, below the log start offset %d: starting over there",
                 future.name, future.log_end_offset, current.log_start_offset)
        future.truncate_fully_and_start_at(current.log_start_offset)
    else:
        cut = truncation_offset(current, future)
        if cut is not None:
            log.info("Truncating the future log of %s to %d to follow its current log", future.name, cut)
            if cut < current.log_start_offset:
                future.truncate_fully_and_start_at(current.log_start_offset)
            else:
                future.truncate_to(cut)
    copied = 0
    if future.log_end_offset < current.log_end_offset:
        data = current.read(future.log_end_offset, max_bytes).records.read_bytes()
        if data:
            future.append_as_follower(bytearray(data))
            copied = len(data)
    future.follow_leader_log_start_offset(current.log_start_offset)
    future.high_watermark = min(current.high_watermark, future.log_end_offset)
    return copied


def caught_up(current: Log, future: Log) -> bool:
    """The future log holds everything the current one does (the swap may happen)."""
    return future.log_end_offset == current.log_end_offset and truncation_offset(current, future) is None
