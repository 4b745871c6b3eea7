"""Offsets committed in a transaction (TxnOffsetCommit): pending until the transaction's marker,
committed by COMMIT unless a plain commit came later, dropped by ABORT; UNSTABLE_OFFSET_COMMIT for
readers asking for stable offsets meanwhile; and the same when replayed from the log."""

from group_harness import Harness

from samsa.coordinator.group import RequestInfo
from samsa.coordinator.group_coordinator import GroupCoordinator
from samsa.coordinator.offsets import OffsetAndMetadata, OffsetMetadataManager, offset_commit_record
from samsa.wire.errors import ErrorCode as E
from samsa.wire.protocol import ApiKey, request_class

TxnOffsetCommit = request_class(ApiKey.TXN_OFFSET_COMMIT)
PID = 77


def txn_commit_body(group: str, offsets: dict[tuple[str, int], int], *, member_id: str = "",
                    generation: int = -1, producer_id: int = PID):
    return TxnOffsetCommit(transactional_id="tx", group_id=group, producer_id=producer_id, producer_epoch=0,
                           generation_id_or_member_epoch=generation, member_id=member_id, topics=[
                               TxnOffsetCommit.TxnOffsetCommitRequestTopic(name=t, partitions=[
                                   TxnOffsetCommit.TxnOffsetCommitRequestPartition(
                                       partition_index=p, committed_offset=o, committed_metadata="")])
                               for (t, p), o in offsets.items()])


def txn_commit(h: Harness, group: str, offsets: dict[tuple[str, int], int], *, member_id: str = "",
               generation: int = -1, producer_id: int = PID):
    body = txn_commit_body(group, offsets, member_id=member_id, generation=generation, producer_id=producer_id)
    ticket = h.send(GroupCoordinator.txn_offset_commit, body, version=3)
    response = h.answer(ticket)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def stable_fetch(h: Harness, group: str, partitions: list[tuple[str, int]]):
    result = h.coordinator.fetch_offsets(RequestInfo(8), group, [(t, [p]) for t, p in partitions],
                                         require_stable=True)
    return {(t.name, p.partition_index): (p.error_code, p.committed_offset)
            for t in result.topics for p in t.partitions}


def marker(h: Harness, group: str, commit: bool, producer_id: int = PID):
    h.apply(h.coordinator.complete_transaction(h.now, producer_id, commit, {h.coordinator.partition_for(group)}))


def test_transactional_offsets_count_only_once_committed():
    h = Harness(group_initial_rebalance_delay_ms=0)
    assert txn_commit(h, "g", {("t", 0): 5, ("t", 1): 6}) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    assert h.fetch("g", {"t": [0, 1]}) == {("t", 0): -1, ("t", 1): -1}
    assert stable_fetch(h, "g", [("t", 0)]) == {("t", 0): (E.UNSTABLE_OFFSET_COMMIT, -1)}
    marker(h, "g", commit=True)
    assert h.fetch("g", {"t": [0, 1]}) == {("t", 0): 5, ("t", 1): 6}
    assert stable_fetch(h, "g", [("t", 0)]) == {("t", 0): (E.NONE, 5)}

    txn_commit(h, "g", {("t", 0): 9})
    marker(h, "g", commit=False)
    assert h.fetch("g", {"t": [0]}) == {("t", 0): 5}
    assert stable_fetch(h, "g", [("t", 0)]) == {("t", 0): (E.NONE, 5)}


def test_a_marker_completes_only_the_groups_of_its_partitions():
    h = Harness(group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=50)
    groups = ["a", "b"]
    assert h.coordinator.partition_for("a") != h.coordinator.partition_for("b")
    for group in groups:
        txn_commit(h, group, {("t", 0): 3})
    marker(h, "a", commit=True)
    assert h.fetch("a", {"t": [0]}) == {("t", 0): 3} and h.fetch("b", {"t": [0]}) == {("t", 0): -1}
    marker(h, "b", commit=True)
    assert h.fetch("b", {"t": [0]}) == {("t", 0): 3}


def test_a_producer_commits_for_a_group_it_is_not_a_member_of():
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, _ = h.stable_group("g", 2)
    # generation -1, no member: refused to OffsetCommit on a live group, fine for TxnOffsetCommit.
    assert txn_commit(h, "g", {("t", 0): 1}) == {("t", 0): E.NONE}
    assert txn_commit(h, "g", {("t", 0): 1}, member_id=leader.member_id, generation=7) == {
        ("t", 0): E.ILLEGAL_GENERATION}
    assert txn_commit(h, "nope", {("t", 0): 1}, generation=3) == {("t", 0): E.ILLEGAL_GENERATION}


def test_a_plain_commit_after_the_transactional_one_wins():
    offsets = OffsetMetadataManager()
    offsets.put_pending(PID, "g", "t", 0, OffsetAndMetadata(5))
    offsets.put("g", "t", 0, OffsetAndMetadata(8))  # written after the transaction's offset
    offsets.put_pending(PID, "g", "t", 1, OffsetAndMetadata(2))
    assert offsets.complete_transaction(PID, commit=True) == ["g"]
    assert offsets.get("g", "t", 0).offset == 8 and offsets.get("g", "t", 1).offset == 2
    assert not offsets.has_pending("g", "t", 0) and not offsets.has_open_transactions("g")


def test_replaying_the_log_rebuilds_pending_and_committed_offsets():
    def record(offset: int, partition: int = 0):
        return offset_commit_record("g", "t", partition, OffsetAndMetadata(offset, commit_timestamp=1))
    offsets = OffsetMetadataManager()
    offsets.replay(*record(1))
    offsets.replay(*record(4), producer_id=PID)
    offsets.replay(*record(9, 1), producer_id=PID + 1)
    offsets.complete_transaction(PID, commit=True)  # its COMMIT marker
    assert offsets.get("g", "t", 0).offset == 4
    assert offsets.has_pending("g", "t", 1)  # PID + 1 has no marker yet
    offsets.replay(offset_commit_record("g", "t", 1, OffsetAndMetadata(0))[0], None)  # a tombstone
    assert not offsets.has_pending("g", "t", 1)
    assert offsets.partitions_of("g") == [("t", 0)]


def test_expiry_waits_for_pending_offsets():
    h = Harness(group_initial_rebalance_delay_ms=0, offsets_retention_ms=1000, offsets_retention_check_interval_ms=500)
    h.commit("g", {("t", 0): 1})
    txn_commit(h, "g", {("t", 0): 2})
    h.advance(5000)
    assert h.group("g") is not None and h.fetch("g", {"t": [0]}) == {("t", 0): 1}
    marker(h, "g", commit=False)
    h.advance(1000)
    assert h.fetch("g", {"t": [0]}) == {("t", 0): -1}


def test_the_offsets_are_written_with_the_guard_of_their_transactions_verification():
    """The shell verified the transaction on the offsets partition: the write brings the guard back
    (a marker in between makes the log refuse it, tests/server/test_transactions_v2.py)."""
    h = Harness()
    actions = h.coordinator.txn_offset_commit(h.now, 1, RequestInfo(5), txn_commit_body("g", {("t", 0): 5}),
                                              verification_guard=42)
    [append] = actions.appends
    assert (append.producer, append.verification_guard) == ((PID, 0), 42)
