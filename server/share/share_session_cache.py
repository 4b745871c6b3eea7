"""Share sessions (KIP-932), as Kafka 4.4's ShareSessionCache, ShareSession, ShareSessionContext and
FinalContext keep them: pure bookkeeping, the ShareFetch and ShareAcknowledge handlers do the rest.

A share session is keyed by (group id, member id). A ShareFetch with epoch 0 opens one (replacing the
member's old one) with the partitions it names; later requests carry the session's epoch, which
the broker raises by one on each (ShareAcknowledge too), and name only partitions to add, with
`forgotten_topics_data` for those to drop; a subsequent fetch reads every partition of the session,
and its response leaves out the partitions with nothing to say. Epoch -1 closes the session (its
ShareFetch fetches nothing: a FinalContext). At most `group.share.max.share.sessions` sessions
exist; a new one past that is refused SHARE_SESSION_LIMIT_REACHED.

A session belongs to the connection that opened it: when that connection closes, the member's
acquired records are released and its session goes (Kafka's ConnectionDisconnectListener calling
ShareGroupListener.onMemberLeave), and once a group has no session left on this broker its share
partitions are dropped from memory (onGroupEmpty; they are read back from the persister when
fetched again).
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from ...wire.errors import ErrorCode
from .share_group_listener import ShareGroupListener

log = logging.getLogger("samsa.share")

INITIAL_EPOCH = 0  # ShareRequestMetadata.INITIAL_EPOCH: opens a session
FINAL_EPOCH = -1  # ShareRequestMetadata.FINAL_EPOCH: closes it


def next_epoch(epoch: int) -> int:
    """ShareRequestMetadata.nextEpoch: the epoch after `epoch`; past the largest int32 it wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


class TopicIdPartition(NamedTuple):
    """A partition a share request names: its topic id, and the topic's name as the metadata knew
    it when the request came (None for an unknown topic id)."""

    topic_id: uuid.UUID
    partition: int
    topic: str | None

    @property
    def key(self) -> tuple[uuid.UUID, int]:
        """What a session keys its partitions by (Kafka's CachedSharePartition equality)."""
        return self.topic_id, self.partition


class ShareSessionError(Exception):
    """A request refused at the session level: the error code answers the whole request."""

    def __init__(self, error_code: int, message: str = "") -> None:
        super().__init__(message or str(error_code))
        self.error_code = error_code


@dataclass
class CachedSharePartition:
    """A partition of a session (Kafka's CachedSharePartition)."""

    partition: TopicIdPartition
    # Added by an incremental request: the next response names it even with nothing to say; also
    # set once it answered an error, until a response names it again.
    requires_update_in_response: bool = False

    def must_respond(self, has_records: bool, error_code: int, update: bool) -> bool:
        """Kafka's maybeUpdateResponseData: whether an incremental response names the partition
        (records, an error, or a pending update); with `update`, what it was told is remembered."""
        must = has_records
        if self.requires_update_in_response:
            must = True
            if update:
                self.requires_update_in_response = False
        if error_code != ErrorCode.NONE:
            if update:
                self.requires_update_in_response = True
            must = True
        return must


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    connection_id: str
    epoch: int  # the epoch the member's next request must carry
    # By (topic id, partition), in the order fetches read them: partitions that answered records
    # move to the end, so that the others come first next time.
    partitions: OrderedDict[tuple[uuid.UUID, int], CachedSharePartition] = field(default_factory=OrderedDict)
    cached_size: int = -1  # the partition count last added to the cache's total

    @property
    def key(self) -> tuple[str, str]:
        return self.group_id, self.member_id

    def update(self, added: Iterable[TopicIdPartition], forgotten: Iterable[TopicIdPartition]) -> None:
        """An incremental request: its partitions join the session (each named in the next
        response), those it forgets leave it."""
        for tip in added:
            if tip.key not in self.partitions:
                self.partitions[tip.key] = CachedSharePartition(tip, requires_update_in_response=True)
        for tip in forgotten:
            self.partitions.pop(tip.key, None)

    def update_cached_size(self) -> int:
        """The change of the partition count since last counted (Kafka's updateCachedSize)."""
        previous, self.cached_size = self.cached_size, len(self.partitions)
        return self.cached_size - previous if previous != -1 else self.cached_size


@dataclass
class _ConnectionSession:
    """The session a connection opened; stale once the session went some other way."""

    key: tuple[str, str]
    stale: bool = False


class ErroneousAndValid(NamedTuple):
    """The partitions of a fetch: those answered an error at once, and those to read."""

    erroneous: dict[TopicIdPartition, int]
    valid: list[TopicIdPartition]


class ShareFetchContext:
    """How one ShareFetch's partitions are chosen and its response shaped (Kafka's ShareFetchContext)."""

    def erroneous_and_valid(self) -> ErroneousAndValid:
        raise NotImplementedError

    def response_partitions(self, updates: dict[TopicIdPartition, tuple[bool, int]]) -> tuple[int, list[TopicIdPartition]]:
        """The top-level error and the partitions the response names, from `updates` (each
        partition's (has records, error code)), remembering what the session was told."""
        raise NotImplementedError

    def throttled_error(self) -> int:
        """The top-level error of a throttled response (which names no partition)."""
        return ErrorCode.NONE


class FinalContext(ShareFetchContext):
    """A ShareFetch closing its session (epoch -1): it reads nothing; its acknowledgements apply."""

    def erroneous_and_valid(self) -> ErroneousAndValid:
        return ErroneousAndValid({}, [])

    def response_partitions(self, updates):
        return ErrorCode.NONE, list(updates)


class ShareSessionContext(ShareFetchContext):
    """A ShareFetch in a session: the full one opening it (the request's partitions), or a
    subsequent one (every partition of the session; the response names only those with news)."""

    def __init__(self, epoch: int, partitions: list[TopicIdPartition] | None = None,
                 session: ShareSession | None = None) -> None:
        self.epoch = epoch
        self.partitions = partitions
        self.session = session

    @property
    def is_subsequent(self) -> bool:
        return self.session is not None

    def erroneous_and_valid(self) -> ErroneousAndValid:
        if self.session is None:
            tips = self.partitions or []
        else:
            tips = [c.partition for c in self.session.partitions.values()]
        erroneous = {tip: int(ErrorCode.UNKNOWN_TOPIC_ID) for tip in tips if tip.topic is None}
        return ErroneousAndValid(erroneous, [tip for tip in tips if tip.topic is not None])

    def _epoch_moved(self) -> bool:
        """Another request of the session (a duplicate, a ShareAcknowledge) moved its epoch meanwhile."""
        session = self.session
        if session is not None and session.epoch != next_epoch(self.epoch):
            log.debug("Subsequent share session %s expected epoch %d, but got %d. Possible duplicate request.",
                      session.key, next_epoch(self.epoch), session.epoch)
            return True
        return False

    def response_partitions(self, updates):
        session = self.session
        if session is None:
            return ErrorCode.NONE, list(updates)
        if self._epoch_moved():
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, []
        named = []
        for tip, (has_records, error_code) in updates.items():
            cached = session.partitions.get(tip.key)
            if cached is None:  # forgotten meanwhile by a later request: nothing to say about it
                continue
            if cached.must_respond(has_records, error_code, update=True):
                named.append(tip)
                if has_records:
                    session.partitions.move_to_end(tip.key)
        return ErrorCode.NONE, named

    def throttled_error(self) -> int:
        return ErrorCode.INVALID_SHARE_SESSION_EPOCH if self._epoch_moved() else ErrorCode.NONE


class ShareSessionCache:
    """The broker's share sessions, at most `max_entries` (group.share.max.share.sessions)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._members_per_group: dict[str, int] = {}
        self._connection_sessions: dict[str, _ConnectionSession] = {}
        self.listener: ShareGroupListener | None = None
        self.total_partitions = 0  # Kafka's SharePartitionsCount gauge
        self.evictions = 0  # Kafka's ShareSessionEvictionsPerSec meter, as a count

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        session = self.sessions.pop((group_id, member_id), None)
        if session is not None:
            self.total_partitions -= max(session.cached_size, 0)
            self._members_per_group[group_id] = self._members_per_group.get(group_id, 1) - 1
            connection = self._connection_sessions.get(session.connection_id)
            if connection is not None and connection.key == session.key:
                connection.stale = True
        return session

    def _create(self, group_id: str, member_id: str, partitions: list[TopicIdPartition],
                connection_id: str) -> ShareSession | None:
        if len(self.sessions) >= self.max_entries:
            return None
        session = ShareSession(group_id, member_id, connection_id, next_epoch(INITIAL_EPOCH),
                               OrderedDict((tip.key, CachedSharePartition(tip)) for tip in partitions))
        self.sessions[session.key] = session
        self.total_partitions += session.update_cached_size()
        self._members_per_group[group_id] = self._members_per_group.get(group_id, 0) + 1
        self._connection_sessions[connection_id] = _ConnectionSession(session.key)
        return session

    def new_context(self, group_id: str, member_id: str, epoch: int, partitions: list[TopicIdPartition],
                    forgotten: list[TopicIdPartition], acknowledging: bool, connection_id: str) -> ShareFetchContext:
        """The context of a ShareFetch (Kafka's SharePartitionManager.newContext); raises
        ShareSessionError with the request's top-level error."""
        if epoch == FINAL_EPOCH:
            if self.get(group_id, member_id) is None:
                log.error("Share session error for %s: no such share session found", (group_id, member_id))
                raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
            return FinalContext()
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                log.error("Acknowledge data present in Initial Fetch Request for group %s member %s", group_id, member_id)
                raise ShareSessionError(ErrorCode.INVALID_REQUEST)
            self.remove(group_id, member_id)
            if self._create(group_id, member_id, partitions, connection_id) is None:
                log.error("Could not create a share session for group %s member %s", group_id, member_id)
                raise ShareSessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
            return ShareSessionContext(epoch, partitions=partitions)
        session = self._session_at(group_id, member_id, epoch)
        session.update(partitions, forgotten)
        self.total_partitions += session.update_cached_size()
        session.epoch = next_epoch(session.epoch)
        return ShareSessionContext(epoch, session=session)

    def acknowledge_session_update(self, group_id: str, member_id: str, epoch: int) -> None:
        """A ShareAcknowledge's epoch (Kafka's acknowledgeSessionUpdate): it cannot open a session;
        -1 is checked only for the session's existence (the handler closes it once answered)."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        if epoch == FINAL_EPOCH:
            if self.get(group_id, member_id) is None:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
            return
        session = self._session_at(group_id, member_id, epoch)
        self.total_partitions += session.update_cached_size()
        session.epoch = next_epoch(session.epoch)

    def _session_at(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        session = self.get(group_id, member_id)
        if session is None:
            log.debug("Share session error for %s: no such share session found", (group_id, member_id))
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if session.epoch != epoch:
            log.debug("Share session error for %s: expected epoch %d, but got %d instead", session.key,
                      session.epoch, epoch)
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        return session

    def members(self, group_id: str) -> int:
        return self._members_per_group.get(group_id, 0)

    def connection_closed(self, connection_id: str) -> None:
        """The connection that opened a session closed (Kafka's ClientConnectionDisconnectListener):
        the member leaves (its records are released, its session goes), and a group left without
        sessions here is empty."""
        connection = self._connection_sessions.pop(connection_id, None)
        if connection is None:
            return
        group_id, member_id = connection.key
        if not connection.stale and self.get(group_id, member_id) is not None:
            self.evictions += 1
            if self.listener is not None:
                self.listener.on_member_leave(group_id, member_id)
            self.remove(group_id, member_id)
        if self._members_per_group.get(group_id, 0) <= 0:
            self._members_per_group.pop(group_id, None)
            if self.listener is not None:
                self.listener.on_group_empty(group_id)

    def remove_all(self) -> None:
        """share.version no longer finalized (Kafka's onShareVersionToggle)."""
        self.sessions.clear()
        self._members_per_group.clear()
        self.total_partitions = 0
