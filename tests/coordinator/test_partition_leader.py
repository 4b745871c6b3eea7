"""The leader's view of its followers: log end offsets, catch-up times, ISR changes (pending until
the controller confirms them) and the high watermark, driven by events and an explicit clock."""

import pytest

from samsa.coordinator.partition_leader import IsrChange, PartitionLeaderState
from samsa.wire.errors import ErrorCode

LAG_MS = 10_000


def leader(isr=(0, 1, 2), replicas=(0, 1, 2), leo=0, hw=0, now=1_000) -> PartitionLeaderState:
    return PartitionLeaderState(0, list(replicas), list(isr), leader_epoch_start_offset=leo, high_watermark=hw,
                                now_ms=now)


def advance(state: PartitionLeaderState, leader_log_end_offset: int, now: int = 1_000, min_isr: int = 1) -> bool:
    return state.maybe_advance_high_watermark(leader_log_end_offset, now, LAG_MS, min_isr)


def commit(state: PartitionLeaderState, change: IsrChange) -> None:
    assert state.pending is change
    assert state.committed(change, change.isr)


def test_high_watermark_is_the_smallest_log_end_offset_of_the_isr():
    state = leader()
    assert not advance(state, 10)  # no follower has fetched yet
    state.follower_fetched(1, 10, 10, now_ms=1_100)
    assert not advance(state, 10)
    state.follower_fetched(2, 7, 10, now_ms=1_100)
    assert advance(state, 10)
    assert state.high_watermark == 7
    state.follower_fetched(2, 5, 10, now_ms=1_200)  # a follower that truncated: the watermark stays
    assert not advance(state, 10)
    assert state.high_watermark == 7


def test_an_unreplicated_leader_moves_the_high_watermark_with_its_log():
    state = leader(isr=(0,), replicas=(0,))
    assert not state.replicated
    assert advance(state, 3) and state.high_watermark == 3


def test_a_follower_not_caught_up_for_the_lag_time_leaves_the_isr():
    state = leader(now=1_000)
    state.follower_fetched(1, 5, 5, now_ms=2_000)
    state.follower_fetched(2, 5, 5, now_ms=2_000)
    # The leader appends; follower 1 keeps up, follower 2 stops fetching.
    state.follower_fetched(1, 8, 8, now_ms=3_000)
    assert state.maybe_shrink_isr(8, now_ms=2_000 + LAG_MS, lag_time_max_ms=LAG_MS) is None
    change = state.maybe_shrink_isr(8, now_ms=2_001 + LAG_MS, lag_time_max_ms=LAG_MS)
    assert change == IsrChange((0, 1), removed=(2,), committed=(0, 1, 2))
    # Pending: the high watermark still waits for follower 2 until the controller confirms.
    assert state.isr == (0, 1, 2) and state.maximal_isr == (0, 1, 2)
    assert advance(state, 8, now=2_001 + LAG_MS) and state.high_watermark == 5
    commit(state, change)
    assert state.isr == (0, 1)
    # Without follower 2 the high watermark is follower 1's.
    assert advance(state, 8, now=2_001 + LAG_MS) and state.high_watermark == 8


def test_a_follower_caught_up_with_a_quiet_leader_stays_in_sync():
    state = leader(now=1_000)
    state.follower_fetched(1, 5, 5, now_ms=1_000)
    state.follower_fetched(2, 5, 5, now_ms=1_000)
    assert state.maybe_shrink_isr(5, now_ms=1_000 + 10 * LAG_MS, lag_time_max_ms=LAG_MS) is None


def test_a_fetch_reaching_the_previous_fetch_end_counts_as_caught_up_then():
    state = leader(isr=(0, 1), replicas=(0, 1), now=0)
    state.follower_fetched(1, 0, 10, now_ms=1_000)  # the leader had 10 at this fetch
    state.follower_fetched(1, 10, 20, now_ms=5_000)  # reached 10: caught up as of the previous fetch
    assert state.followers[1].last_caught_up_time_ms == 1_000
    assert state.maybe_shrink_isr(20, now_ms=1_000 + LAG_MS, lag_time_max_ms=LAG_MS) is None
    assert state.maybe_shrink_isr(20, now_ms=1_001 + LAG_MS, lag_time_max_ms=LAG_MS) == IsrChange(
        (0,), removed=(1,), committed=(0, 1))


def test_a_follower_joins_the_isr_once_it_has_the_high_watermark_and_the_epoch_start():
    state = leader(isr=(0,), leo=4, hw=4)
    assert state.follower_fetched(1, 3, 6, now_ms=1_000) is None
    change = state.follower_fetched(1, 4, 6, now_ms=1_100)
    assert change == IsrChange((0, 1), added=(1,), committed=(0,))
    commit(state, change)
    assert state.isr == (0, 1)
    assert state.follower_fetched(1, 6, 6, now_ms=1_200) is None  # already in
    assert state.follower_fetched(7, 6, 6, now_ms=1_200) is None  # not a replica of the partition


def test_acks_all_completes_at_the_high_watermark_and_counts_the_isr():
    state = leader(isr=(0, 1), replicas=(0, 1, 2))
    assert state.required_offset_reached(5, min_insync_replicas=2) == (False, False)
    state.follower_fetched(1, 5, 5, now_ms=1_000)
    advance(state, 5)
    assert state.required_offset_reached(5, min_insync_replicas=2) == (True, True)
    assert state.required_offset_reached(5, min_insync_replicas=3) == (True, False)


def test_an_expansion_pending_counts_the_new_member_for_the_high_watermark():
    """Kafka's PendingExpandIsr: the maximal ISR (with the joining follower) holds the high
    watermark and counts for acks=all until the controller answers; no other change starts."""
    state = leader(isr=(0, 1), replicas=(0, 1, 2), leo=4, hw=4)
    state.follower_fetched(1, 6, 6, now_ms=1_000)
    change = state.follower_fetched(2, 4, 6, now_ms=1_000)
    assert change == IsrChange((0, 1, 2), added=(2,), committed=(0, 1))
    assert state.isr == (0, 1) and state.maximal_isr == (0, 1, 2)
    assert not advance(state, 6) and state.high_watermark == 4  # follower 2 has 4: no further
    assert state.required_offset_reached(4, min_insync_replicas=3) == (True, True)
    # While pending: a lagging member is not dropped, nothing else proposed.
    assert state.maybe_shrink_isr(6, now_ms=1_000 + 2 * LAG_MS, lag_time_max_ms=LAG_MS) is None
    commit(state, change)
    assert state.isr == (0, 1, 2) and state.pending is None


def test_a_shrink_pending_keeps_waiting_for_the_member_it_drops():
    """Kafka's PendingShrinkIsr: until the controller confirms, the high watermark still waits for
    the dropped follower (a refused shrink must not have let it run ahead)."""
    state = leader(isr=(0, 1, 2), now=0)
    state.follower_fetched(1, 9, 9, now_ms=LAG_MS + 1)
    state.follower_fetched(2, 3, 9, now_ms=LAG_MS + 1)
    state.high_watermark = 3
    change = state.maybe_shrink_isr(9, now_ms=LAG_MS + 1, lag_time_max_ms=LAG_MS)
    assert change.isr == (0, 1) and change.removed == (2,)
    assert not advance(state, 9, now=LAG_MS + 1)
    assert state.required_offset_reached(3, min_insync_replicas=3) == (True, True)  # the maximal ISR: 3
    assert state.refused(change, ErrorCode.INELIGIBLE_REPLICA) is False  # not applied: rolled back
    assert state.pending is None and state.isr == (0, 1, 2)
    again = state.maybe_shrink_isr(9, now_ms=LAG_MS + 2, lag_time_max_ms=LAG_MS)
    assert again is not None and again is not change
    assert state.committed(change, (0, 1)) is False  # an answer for the old proposal: out of date
    commit(state, again)
    assert advance(state, 9, now=LAG_MS + 2) and state.high_watermark == 9


@pytest.mark.parametrize("error", [ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                                   ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                                   ErrorCode.INVALID_REQUEST, ErrorCode.NEW_LEADER_ELECTED])
def test_a_refusal_only_new_metadata_settles_leaves_the_change_pending(error):
    state = leader(isr=(0,), replicas=(0, 1), leo=0, hw=0)
    change = state.follower_fetched(1, 0, 0, now_ms=1_000)
    assert state.refused(change, error) is False  # not retried
    assert state.pending is change and state.isr == (0,)
    assert state.follower_fetched(1, 0, 0, now_ms=1_100) is None  # nothing new until a LeaderAndIsr


@pytest.mark.parametrize("error", [ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA])
def test_a_change_the_controller_did_not_apply_is_rolled_back(error):
    state = leader(isr=(0,), replicas=(0, 1))
    change = state.follower_fetched(1, 0, 0, now_ms=1_000)
    assert state.refused(change, error) is False
    assert state.pending is None and state.isr == (0,)
    assert state.follower_fetched(1, 0, 0, now_ms=1_100) is not None  # proposed again


def test_other_errors_are_retried():
    state = leader(isr=(0,), replicas=(0, 1))
    change = state.follower_fetched(1, 0, 0, now_ms=1_000)
    assert state.refused(change, ErrorCode.REQUEST_TIMED_OUT) is True
    assert state.pending is change


def test_the_high_watermark_waits_while_the_isr_is_under_min_insync_replicas():
    """Kafka 3.9's maybeIncrementLeaderHW: under min.insync.replicas (at most the replication
    factor) the high watermark stays."""
    state = leader(isr=(0,), replicas=(0, 1, 2), now=0)
    assert not advance(state, 5, now=LAG_MS * 3, min_isr=2)
    assert advance(state, 5, now=LAG_MS * 3, min_isr=1) and state.high_watermark == 5
    alone = leader(isr=(0,), replicas=(0,))
    assert advance(alone, 5, min_isr=3)  # min.insync.replicas above the replication factor: 1 counts


def test_a_caught_up_follower_outside_the_isr_holds_the_high_watermark():
    """It is about to join: the high watermark waits for it (shouldWaitForReplicaToJoinIsr)."""
    state = leader(isr=(0, 1), replicas=(0, 1, 2), leo=0, hw=0)
    state.follower_fetched(1, 10, 10, now_ms=1_000)
    state.followers[2].update_fetch_state(6, 10, now_ms=1_000)
    state.followers[2].last_caught_up_time_ms = 1_000  # caught up a moment ago
    assert advance(state, 10, now=1_000) and state.high_watermark == 6
    assert advance(state, 10, now=1_000 + LAG_MS + 1) and state.high_watermark == 10  # no longer caught up


def test_a_re_elected_leader_keeps_its_followers_log_end_offsets():
    """Kafka's resetReplicaState: a new leader knows nothing of its followers; a re-elected one (a
    new epoch, the same leader) keeps their log end offsets, so the high watermark moves at once."""
    before = leader(isr=(0, 1, 2), leo=0, hw=0, now=1_000)
    before.follower_fetched(1, 8, 8, now_ms=1_000)
    before.follower_fetched(2, 8, 8, now_ms=1_000)
    again = PartitionLeaderState(0, [0, 1, 2], [0, 1], leader_epoch_start_offset=10, high_watermark=8, now_ms=100_000,
                                 previous=before)
    assert again.followers[1].log_end_offset == 8 and again.followers[2].log_end_offset == 8
    assert again.followers[2].last_caught_up_time_ms == 0  # out of the ISR now
    assert not advance(again, 10, now=100_000) and again.high_watermark == 8  # follower 1 has 8
    again.follower_fetched(1, 10, 10, now_ms=100_100)
    assert advance(again, 10, now=100_100) and again.high_watermark == 10
    fresh = PartitionLeaderState(0, [0, 1, 2], [0, 1], leader_epoch_start_offset=10, high_watermark=8, now_ms=100_000)
    assert fresh.followers[1].log_end_offset == -1
