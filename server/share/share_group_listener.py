"""What the share session cache tells the share fetch path about share group membership (Kafka's
ShareGroupListener): a member left (the connection its share session was opened on closed), or a
group has no member with a share session on this broker left. SharePartitionManager implements it
(it releases what the member had acquired and drops its share session); implementations do not
block.

As in Kafka, the group coordinator does not call it: a member that leaves its group with a
ShareGroupHeartbeat keeps its share session, and its client then acknowledges and closes it
(ShareAcknowledge with epoch -1), which a released session would answer SHARE_SESSION_NOT_FOUND.
The group coordinator's shell (server/coordinators/group_service.py) can still report its members
leaving to one (tests do); the broker gives it none.
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
