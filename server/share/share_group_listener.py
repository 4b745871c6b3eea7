"""What the group coordinator tells the share fetch path about share group membership (Kafka's
ShareGroupListener): a member left its group (it left, or its session expired), or a group has no
member left. SharePartitionManager implements it (it releases what the member had acquired and drops
its share sessions); the group coordinator's shell (server/coordinators/group_service.py) calls it
once the group's records are written, on the group coordinator's task: implementations do not block.
"""

from __future__ import annotations

from typing import Protocol


class ShareGroupListener(Protocol):
    def on_member_leave(self, group_id: str, member_id: str) -> None:
        """The member is no longer in the share group."""
        ...

    def on_group_empty(self, group_id: str) -> None:
        """The share group has no member left."""
        ...
