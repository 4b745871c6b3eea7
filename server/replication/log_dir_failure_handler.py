"""Kafka's LogDirFailureHandler: the task that acts on a failed log directory once the
LogDirFailureChannel reported it (from whichever thread met the failure): the replica manager
stops fetching and answering for its partitions, and in a ZooKeeper cluster the controller is
told through a /log_dir_event_notification/log_dir_event_<seq> znode
(KafkaZkClient.propagateLogDirEvent), and in a KRaft cluster through the broker's heartbeats
(`on_failure`, the lifecycle's directory_failed), so that it moves those partitions' leaderships to
replicas on healthy disks. Directories that failed before the task started (at startup) are handled too."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

import trio
from kazoo.exceptions import KazooException

from ...storage.log_dir_failure_channel import LogDirFailureChannel

log = logging.getLogger("samsa.replica")
RETRY_BACKOFF_S = 1.0


async def handle_log_dir_failures(failure_channel: LogDirFailureChannel, replica_manager, zk_client, broker_id: int,
                                  on_failure: Callable[[Path], None] | None = None,
                                  *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """`zk_client`: the broker's KafkaZkClient, None for a single broker; `on_failure`: what else
    learns of a failed directory (a KRaft broker's controller)."""
    send, failed = trio.open_memory_channel[Path](math.inf)
    token = trio.lowlevel.current_trio_token()

    def reported(log_dir: Path) -> None:
        try:
            token.run_sync_soon(send.send_nowait, log_dir)
        except trio.RunFinishedError:
            pass

    failure_channel.add_listener(reported)
    for log_dir in failure_channel.offline_log_dirs:
        send.send_nowait(log_dir)
    task_status.started()
    handled: set[Path] = set()
    async for log_dir in failed:
        if log_dir in handled:
            continue
        handled.add(log_dir)
        replica_manager.handle_log_dir_failure(log_dir)
        if zk_client is not None:
            await _propagate(zk_client, broker_id)
        if on_failure is not None:
            on_failure(log_dir)
        log.warning("Stopped serving replicas in dir %s", log_dir)


async def _propagate(zk_client, broker_id: int) -> None:
    """As Kafka's retryRequestUntilConnected: until ZooKeeper takes it."""
    while True:
        try:
            await zk_client.propagate_log_dir_event(broker_id)
            return
        except KazooException as e:
            log.warning("Could not write the log dir event notification (%r); trying again", e)
            await trio.sleep(RETRY_BACKOFF_S)
