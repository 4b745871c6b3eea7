"""What the metrics endpoint reports on once the broker's logs are loaded (server/metrics/collectors.py
reads it at each scrape). Kept apart from the collectors so that the broker names it without
importing prometheus_client, which only a broker serving metrics loads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..coordinators.group_service import GroupService
    from ..coordinators.share_service import ShareService
    from ..share.share_partition_manager import SharePartitionManager
    from ...storage.log_manager import LogManager
    from ..replication.replica_manager import ReplicaManager


@dataclass(frozen=True)
class LoadedBroker:
    replica_manager: ReplicaManager
    log_manager: LogManager
    groups: GroupService
    # (active controllers here: 0 or 1, partitions without a leader as the active controller sees
    # them); a single broker is its own controller and leads every partition it has: (1, 0).
    controller_counts: Callable[[], tuple[int, int]]
    share_coordinator: ShareService | None = None  # __share_group_state's partitions (share groups)
    share_partitions: SharePartitionManager | None = None  # the share partitions led here, their fetches
