"""Drives a GroupCoordinator the way server/coordinators/group_service.py does, on an explicit clock.

Appends are kept in memory (per partition, in order) so a test can restart the coordinator from
them; `fail_appends` makes the next appends fail with that error code.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable

from samsa.coordinator.actions import Actions
from samsa.coordinator.consumer_group import ConsumerGroupConfig
from samsa.coordinator.group import RequestInfo
from samsa.coordinator.group_coordinator import GroupCoordinator, GroupCoordinatorConfig
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

from clocked_harness import ClockedHarness

JoinGroup = request_class(ApiKey.JOIN_GROUP)
SyncGroup = request_class(ApiKey.SYNC_GROUP)
Heartbeat = request_class(ApiKey.HEARTBEAT)
LeaveGroup = request_class(ApiKey.LEAVE_GROUP)
OffsetCommit = request_class(ApiKey.OFFSET_COMMIT)
OffsetDelete = request_class(ApiKey.OFFSET_DELETE)

LATEST = {ApiKey.JOIN_GROUP: 9, ApiKey.SYNC_GROUP: 5, ApiKey.HEARTBEAT: 4, ApiKey.LEAVE_GROUP: 5,
          ApiKey.OFFSET_COMMIT: 9, ApiKey.OFFSET_DELETE: 0}


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


def counting_uuids() -> Callable[[], str]:
    """Member uuids in a known order (00000000-...-000000000001, then ...02): the coordinator's
    member ids are the same in every run."""
    counter = itertools.count(1)
    return lambda: str(uuid.UUID(int=next(counter)))


class Harness(ClockedHarness):
    def __init__(self, now: int = 1_000_000, new_member_uuid: Callable[[], str] | None = None, **config) -> None:
        config.setdefault("group_initial_rebalance_delay_ms", 0)
        # Consumer groups assign at every group epoch unless a test is about the assignment interval.
        config.setdefault("consumer", ConsumerGroupConfig(assignment_interval_ms=0))
        self.now = now
        self.config = GroupCoordinatorConfig(**config)
        self.new_member_uuid = new_member_uuid or counting_uuids()
        self.coordinator = GroupCoordinator(self.config, now, self.new_member_uuid)
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.responses: dict[int, object] = {}
        self.fail_appends: int | None = None
        self._tickets = itertools.count()

    # --- the driver -----------------------------------------------------------------------------

    def apply(self, actions: Actions) -> None:
        responses = list(actions.responses)
        appends = list(actions.appends)
        while appends:
            append = appends.pop(0)
            error = self.fail_appends if self.fail_appends is not None else ErrorCode.NONE
            if error == ErrorCode.NONE:
                self.log.setdefault(append.partition, []).extend(append.records)
            more = self.coordinator.complete_append(append, error, self.now)
            responses += more.responses
            appends += more.appends
        self.record_responses(responses)

    def send(self, method, body, version: int | None = None, client_id: str = "client") -> int:
        """Submit a request; returns its ticket (see `answer`)."""
        ticket = next(self._tickets)
        info = RequestInfo(LATEST[body.API_KEY] if version is None else version, client_id, "/127.0.0.1")
        self.apply(method(self.coordinator, self.now, ticket, info, body))
        return ticket

    def answer(self, ticket: int):
        """The response to `ticket`, or None while it is parked."""
        return self.responses.get(ticket)

    def call(self, method, body, version: int | None = None, client_id: str = "client"):
        ticket = self.send(method, body, version, client_id)
        response = self.answer(ticket)
        assert response is not None, f"{type(body).__name__} is parked"
        return response

    def restart(self, **config) -> Harness:
        """A new coordinator loaded from everything appended so far."""
        # The same member uuids go on: the restarted coordinator must not hand out an id again.
        fresh = Harness(self.now, self.new_member_uuid, **{**self.config.__dict__, **config})
        for partition in sorted(self.log):
            for key, value in self.log[partition]:
                fresh.coordinator.replay(key, value)
        fresh.log = {p: list(records) for p, records in self.log.items()}
        fresh.apply(fresh.coordinator.load_complete(fresh.now))
        return fresh

    # --- requests ---------------------------------------------------------------------------------

    def join(self, group: str, member_id: str = "", *, protocols=None, instance_id: str | None = None,
             session: int = 10_000, rebalance: int = 30_000, version: int | None = None, client_id: str = "client",
             protocol_type: str = "consumer") -> int:
        protocols = protocols if protocols is not None else [("range", subscription("t"))]
        body = JoinGroup(group_id=group, session_timeout_ms=session, rebalance_timeout_ms=rebalance, member_id=member_id,
                         group_instance_id=instance_id, protocol_type=protocol_type,
                         protocols=[JoinGroup.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols])
        return self.send(GroupCoordinator.join_group, body, version, client_id)

    def join_new_member(self, group: str, **kwargs) -> int:
        """JoinGroup as a v4+ client does: get a member id (MEMBER_ID_REQUIRED), join with it."""
        first = self.answer(self.join(group, **kwargs))
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED, first
        return self.join(group, first.member_id, **kwargs)

    def sync(self, group: str, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             instance_id: str | None = None, version: int | None = None) -> int:
        known = self.group(group)
        body = SyncGroup(group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id,
                         protocol_type=known.protocol_type if known else "consumer",
                         protocol_name=(known.protocol_name if known else None) or "range",
                         assignments=[SyncGroup.SyncGroupRequestAssignment(member_id=m, assignment=a)
                                      for m, a in (assignments or {}).items()])
        return self.send(GroupCoordinator.sync_group, body, version)

    def heartbeat(self, group: str, member_id: str, generation: int, instance_id: str | None = None) -> int:
        body = Heartbeat(group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id)
        return self.call(GroupCoordinator.heartbeat, body).error_code

    def leave(self, group: str, *members: tuple[str, str | None], version: int | None = None):
        if version is not None and version < 3:
            body = LeaveGroup(group_id=group, member_id=members[0][0])
        else:
            body = LeaveGroup(group_id=group, members=[LeaveGroup.MemberIdentity(member_id=m, group_instance_id=i)
                                                       for m, i in members])
        return self.call(GroupCoordinator.leave_group, body, version)

    def commit(self, group: str, offsets: dict[tuple[str, int], int], member_id: str = "", generation: int = -1,
               instance_id: str | None = None, metadata: str | None = "", version: int | None = None,
               retention_ms: int = -1):
        by_topic: dict[str, list] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(OffsetCommit.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata))
        body = OffsetCommit(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                            group_instance_id=instance_id, retention_time_ms=retention_ms,
                            topics=[OffsetCommit.OffsetCommitRequestTopic(name=t, partitions=ps)
                                    for t, ps in by_topic.items()])
        response = self.call(GroupCoordinator.offset_commit, body, version)
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    def fetch(self, group: str, topics: dict[str, list[int]] | None = None) -> dict[tuple[str, int], int]:
        result = self.coordinator.fetch_offsets(RequestInfo(8), group,
                                                None if topics is None else list(topics.items()))
        assert result.error_code == ErrorCode.NONE, result
        return {(t.name, p.partition_index): p.committed_offset for t in result.topics for p in t.partitions}

    def delete_groups(self, *group_ids: str) -> dict[str, int]:
        ticket = next(self._tickets)
        self.apply(self.coordinator.delete_groups(self.now, ticket, RequestInfo(2), list(group_ids)))
        return {r.group_id: r.error_code for r in self.responses[ticket].results}

    def group(self, group_id: str):
        return self.coordinator.groups.get(group_id)

    def stable_group(self, group_id: str, members: int, **join_kwargs) -> list:
        """A Stable group of `members` dynamic members; returns their JoinGroup responses (leader first)."""
        tickets = [self.join_new_member(group_id, **join_kwargs) for _ in range(members)]
        self.advance(0)
        while any(self.answer(t) is None for t in tickets):  # the initial delay, as often extended
            self.advance(self.config.group_initial_rebalance_delay_ms)
        joined = [self.answer(t) for t in tickets]
        assert all(j is not None and j.error_code == ErrorCode.NONE for j in joined), joined
        leader = next(j for j in joined if j.leader == j.member_id)
        generation = leader.generation_id
        followers = [j for j in joined if j is not leader]
        parked = [self.sync(group_id, f.member_id, generation) for f in followers]
        synced = self.answer(self.sync(group_id, leader.member_id, generation,
                                       {j.member_id: j.member_id.encode() for j in joined}))
        assert synced.error_code == ErrorCode.NONE, synced
        assert all(self.answer(t).error_code == ErrorCode.NONE for t in parked)
        return [leader, *followers]
