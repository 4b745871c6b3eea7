"""A streams group member (Kafka's StreamsGroupMember) and how it moves to its target assignment
(Kafka's streams CurrentAssignmentBuilder).

As in consumer groups (coordinator/consumer_group_member.py), no two members run a task at once,
with tasks in place of partitions and three kinds of them: a member first gives up the tasks its
target no longer has (UNREVOKED_TASKS, at its old epoch), then moves to the target epoch and takes
the tasks that are free; a task still held on its process by another member (or held active
anywhere) stays unreleased (UNRELEASED_TASKS) until it is let go. Each active task carries the
epoch at which the member got it (the records' AssignmentEpochs), which offset commits are checked
against. A standby becoming active on the same member, or an active becoming a standby, happens in
place, without a revocation round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum

from ..wire.coordinator_records.streams_group_current_member_assignment_value import (
    StreamsGroupCurrentMemberAssignmentValue,
)
from ..wire.coordinator_records.streams_group_current_member_assignment_value import TaskIds as RecordTaskIds
from ..wire.coordinator_records.streams_group_member_metadata_value import (
    Endpoint, KeyValue, StreamsGroupMemberMetadataValue,
)
from ..wire.errors import ErrorCode
from .group import GroupError
from .streams_assignor import Tasks, TasksTuple

__all__ = ["MemberState", "StreamsGroupMember", "TasksWithEpochs", "reconcile"]

# Active tasks with the epoch each was assigned at: {subtopology id: {partition: epoch}}.
ActiveWithEpochs = Mapping[str, Mapping[int, int]]


class MemberState(IntEnum):
    """Kafka's streams MemberState, with its record values."""

    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True)
class TasksWithEpochs:
    """Kafka's TasksTupleWithEpochs."""

    active: ActiveWithEpochs = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def active_tasks(self) -> dict[str, frozenset[int]]:
        return {s: frozenset(ps) for s, ps in self.active.items()}

    def same_tasks(self, tuple_: TasksTuple) -> bool:
        return (self.active_tasks() == dict(tuple_.active) and dict(self.standby) == dict(tuple_.standby)
                and dict(self.warmup) == dict(tuple_.warmup))

    def contains_any(self, other: TasksWithEpochs) -> bool:
        return (_overlap(self.active_tasks(), {s: frozenset(ps) for s, ps in other.active.items()})
                or _overlap(self.standby, other.standby) or _overlap(self.warmup, other.warmup))

    def reset_epochs(self) -> TasksWithEpochs:
        return replace(self, active={s: {p: 0 for p in ps} for s, ps in self.active.items()})


def _overlap(a: Tasks, b: Tasks) -> bool:
    return any(a.get(s, frozenset()) & ps for s, ps in b.items())


EMPTY = TasksWithEpochs()


@dataclass(frozen=True)
class StreamsGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: Mapping[str, str] = field(default_factory=dict)
    assigned: TasksWithEpochs = EMPTY
    pending_revocation: TasksWithEpochs = EMPTY

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == target_epoch

    # --- records -----------------------------------------------------------------------------------

    def metadata_value(self) -> StreamsGroupMemberMetadataValue:
        return StreamsGroupMemberMetadataValue(
            instance_id=self.instance_id, rack_id=self.rack_id, client_id=self.client_id, client_host=self.client_host,
            rebalance_timeout_ms=self.rebalance_timeout_ms, topology_epoch=self.topology_epoch,
            process_id=self.process_id,
            user_endpoint=None if self.user_endpoint is None else Endpoint(host=self.user_endpoint[0],
                                                                          port=self.user_endpoint[1]),
            client_tags=[KeyValue(key=k, value=v) for k, v in sorted(self.client_tags.items())])

    def with_metadata(self, value: StreamsGroupMemberMetadataValue) -> StreamsGroupMember:
        return replace(self, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                       client_host=value.client_host, rebalance_timeout_ms=value.rebalance_timeout_ms,
                       topology_epoch=value.topology_epoch, process_id=value.process_id,
                       user_endpoint=None if value.user_endpoint is None else (value.user_endpoint.host,
                                                                                value.user_endpoint.port),
                       client_tags={kv.key: kv.value for kv in value.client_tags})

    def assignment_value(self) -> StreamsGroupCurrentMemberAssignmentValue:
        a, r = self.assigned, self.pending_revocation
        return StreamsGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch, previous_member_epoch=self.previous_member_epoch, state=self.state,
            active_tasks=_record_with_epochs(a.active), standby_tasks=record_task_ids(a.standby, RecordTaskIds),
            warmup_tasks=record_task_ids(a.warmup, RecordTaskIds),
            active_tasks_pending_revocation=_record_with_epochs(r.active),
            standby_tasks_pending_revocation=record_task_ids(r.standby, RecordTaskIds),
            warmup_tasks_pending_revocation=record_task_ids(r.warmup, RecordTaskIds))

    def with_assignment(self, value: StreamsGroupCurrentMemberAssignmentValue) -> StreamsGroupMember:
        return replace(
            self, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
            state=MemberState.from_value(value.state),
            assigned=TasksWithEpochs(_with_epochs(value.active_tasks, value.member_epoch),
                                     tasks_of(value.standby_tasks), tasks_of(value.warmup_tasks)),
            pending_revocation=TasksWithEpochs(_with_epochs(value.active_tasks_pending_revocation, value.member_epoch),
                                               tasks_of(value.standby_tasks_pending_revocation),
                                               tasks_of(value.warmup_tasks_pending_revocation)))


def record_task_ids(tasks: Tasks, cls) -> list:
    """Tasks as a sorted list of `cls(subtopology_id, partitions)` (a record's or a response's TaskIds)."""
    return [cls(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items()) if ps]


def tasks_of(task_ids) -> dict[str, frozenset[int]]:
    """A request's or a record's TaskIds as tasks (None: none)."""
    result: dict[str, frozenset[int]] = {}
    for t in task_ids or ():
        result[t.subtopology_id] = result.get(t.subtopology_id, frozenset()) | frozenset(t.partitions)
    return result


def _record_with_epochs(active: ActiveWithEpochs) -> list[RecordTaskIds]:
    return [RecordTaskIds(subtopology_id=s, partitions=sorted(ps), assignment_epochs=[ps[p] for p in sorted(ps)])
            for s, ps in sorted(active.items()) if ps]


def _with_epochs(task_ids, default_epoch: int) -> dict[str, dict[int, int]]:
    """Records written before epochs were kept per task have none: the member epoch stands in."""
    result: dict[str, dict[int, int]] = {}
    for t in task_ids:
        epochs = t.assignment_epochs or [default_epoch] * len(t.partitions)
        result.setdefault(t.subtopology_id, {}).update(zip(t.partitions, epochs, strict=False))
    return result


# --- reconciliation (Kafka's CurrentAssignmentBuilder) ---------------------------------------------

# Who runs a task now, as the group knows: the process of its active owner, and of its standbys and warm-ups.
ActiveProcess = Callable[[str, int], "str | None"]
ReplicaProcesses = Callable[[str, int], "set[str]"]


def reconcile(member: StreamsGroupMember, target_epoch: int, target: TasksTuple, active_process: ActiveProcess,
              standby_processes: ReplicaProcesses, warmup_processes: ReplicaProcesses,
              owned: TasksWithEpochs | None) -> StreamsGroupMember:
    """The member's next step towards `target` at `target_epoch`; `owned` is what its heartbeat
    says it has (None: not said)."""
    def not_released(pending: TasksWithEpochs) -> bool:
        return owned is None or owned.contains_any(pending)

    if member.state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, active_process, standby_processes,
                         warmup_processes, not_released)
        return member
    if member.state == MemberState.UNREVOKED_TASKS:
        if not_released(member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, active_process, standby_processes,
                     warmup_processes, not_released)
    if member.state == MemberState.UNRELEASED_TASKS:
        return _next(member, member.member_epoch, target_epoch, target, active_process, standby_processes,
                     warmup_processes, not_released)
    if owned is not None and owned.is_empty():
        return _next(member, target_epoch, target_epoch, target, active_process, standby_processes,
                     warmup_processes, not_released)
    raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                     "The streams group member is in a unknown state. The member must abandon all its tasks and rejoin.")


def _difference(current: Tasks, target: Tasks, unreleased: Callable[[str, int], bool],
                ) -> tuple[dict[str, set[int]], dict[str, set[int]], dict[str, set[int]], bool]:
    """(kept, to revoke, to assign, whether some of those to assign are not released yet)."""
    kept: dict[str, set[int]] = {}
    revoke: dict[str, set[int]] = {}
    assign: dict[str, set[int]] = {}
    has_unreleased = False
    for s in set(current) | set(target):
        cur, tgt = set(current.get(s, ())), set(target.get(s, ()))
        k, r, a = cur & tgt, cur - tgt, tgt - cur
        free = {p for p in a if not unreleased(s, p)}
        has_unreleased |= free != a
        for result, value in ((kept, k), (revoke, r), (assign, free)):
            if value:
                result[s] = value
    return kept, revoke, assign, has_unreleased


def _move(source: dict[str, set[int]], dest: dict[str, set[int]], s: str, p: int) -> None:
    ps = source.get(s)
    if ps is not None and p in ps:
        ps.discard(p)
        if not ps:
            del source[s]
    dest.setdefault(s, set()).add(p)


def _discard(tasks: dict[str, set[int]], s: str, p: int) -> None:
    ps = tasks.get(s)
    if ps is not None and p in ps:
        ps.discard(p)
        if not ps:
            del tasks[s]


def _next(member: StreamsGroupMember, member_epoch: int, target_epoch: int, target: TasksTuple,
          active_process: ActiveProcess, standby_processes: ReplicaProcesses, warmup_processes: ReplicaProcesses,
          not_released: Callable[[TasksWithEpochs], bool]) -> StreamsGroupMember:
    """Kafka's computeNextAssignment."""
    a = member.assigned
    pid = member.process_id
    current_active = a.active_tasks()

    def held_elsewhere_here(processes: ReplicaProcesses, mine: Tasks, s: str, p: int) -> bool:
        return pid in processes(s, p) and p not in mine.get(s, ())

    def active_unreleased(s: str, p: int) -> bool:
        return (active_process(s, p) is not None or held_elsewhere_here(standby_processes, a.standby, s, p)
                or held_elsewhere_here(warmup_processes, a.warmup, s, p))

    def standby_unreleased(s: str, p: int) -> bool:
        return ((active_process(s, p) == pid and p not in current_active.get(s, ()))
                or pid in standby_processes(s, p) or held_elsewhere_here(warmup_processes, a.warmup, s, p))

    def warmup_unreleased(s: str, p: int) -> bool:
        return (active_process(s, p) == pid or held_elsewhere_here(standby_processes, a.standby, s, p)
                or pid in warmup_processes(s, p))

    active_kept, active_revoke, active_assign, u1 = _difference(current_active, target.active, active_unreleased)
    standby_kept, standby_revoke, standby_assign, u2 = _difference(a.standby, target.standby, standby_unreleased)
    warmup_kept, warmup_revoke, warmup_assign, u3 = _difference(a.warmup, target.warmup, warmup_unreleased)

    # An active task becoming a standby of the same member is granted now.
    for s, ps in current_active.items():
        for p in ps:
            if p in standby_assign.get(s, ()):
                _move(standby_assign, standby_kept, s, p)
    # A standby becoming a warm-up, or a warm-up a standby, likewise.
    for s, ps in a.standby.items():
        for p in ps:
            if p in warmup_assign.get(s, ()):
                _move(warmup_assign, warmup_kept, s, p)
                _discard(standby_revoke, s, p)
    for s, ps in a.warmup.items():
        for p in ps:
            if p in standby_assign.get(s, ()):
                _move(standby_assign, standby_kept, s, p)
                _discard(warmup_revoke, s, p)
    # A standby or warm-up becoming active is not revoked: it is kept until the active task is granted.
    for held, revoke in ((a.standby, standby_revoke), (a.warmup, warmup_revoke)):
        for s, ps in held.items():
            for p in ps:
                if p in target.active.get(s, ()):
                    _discard(revoke, s, p)
    pending = TasksWithEpochs({s: {p: a.active[s][p] for p in ps} for s, ps in active_revoke.items()},
                              _frozen(standby_revoke), _frozen(warmup_revoke))
    to_revoke = not pending.is_empty() and not_released(pending)
    for held, kept in ((a.standby, standby_kept), (a.warmup, warmup_kept)):
        for s, ps in held.items():
            for p in ps:
                promoted_now = not to_revoke and p in active_assign.get(s, ())
                if p in target.active.get(s, ()) and not promoted_now:
                    kept.setdefault(s, set()).add(p)

    kept_active = {s: {p: a.active[s][p] for p in ps} for s, ps in active_kept.items()}
    has_unreleased = u1 or u2 or u3
    if to_revoke:
        return replace(member, state=MemberState.UNREVOKED_TASKS, member_epoch=member_epoch,
                       previous_member_epoch=member.member_epoch,
                       assigned=TasksWithEpochs(kept_active, _frozen(standby_kept), _frozen(warmup_kept)),
                       pending_revocation=pending)
    assigned_active = {s: dict(ps) for s, ps in kept_active.items()}
    for s, granted in active_assign.items():
        for p in granted:
            assigned_active.setdefault(s, {})[p] = target_epoch
    assigned = TasksWithEpochs(assigned_active, _frozen(_union(standby_kept, standby_assign)),
                               _frozen(_union(warmup_kept, warmup_assign)))
    return replace(member, state=MemberState.UNRELEASED_TASKS if has_unreleased else MemberState.STABLE,
                   member_epoch=target_epoch, previous_member_epoch=member.member_epoch, assigned=assigned,
                   pending_revocation=EMPTY)


def _frozen(tasks: Mapping[str, set[int]]) -> dict[str, frozenset[int]]:
    return {s: frozenset(ps) for s, ps in tasks.items() if ps}


def _union(a: Mapping[str, set[int]], b: Mapping[str, set[int]]) -> dict[str, set[int]]:
    result = {s: set(ps) for s, ps in a.items()}
    for s, ps in b.items():
        result.setdefault(s, set()).update(ps)
    return result
