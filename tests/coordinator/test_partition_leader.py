"""The leader's view of its followers: log end offsets, catch-up times, ISR changes and the high
watermark, driven by events and an explicit clock."""

from samsa.coordinator.partition_leader import IsrChange, PartitionLeaderState

LAG_MS = 10_000


def leader(isr=(0, 1, 2), replicas=(0, 1, 2), leo=0, hw=0, now=1_000) -> PartitionLeaderState:
    return PartitionLeaderState(0, list(replicas), list(isr), leader_epoch_start_offset=leo, high_watermark=hw,
                                now_ms=now)


def test_high_watermark_is_the_smallest_log_end_offset_of_the_isr():
    state = leader()
    assert not state.maybe_advance_high_watermark(10)  # no follower has fetched yet
    state.follower_fetched(1, 10, 10, now_ms=1_100)
    assert not state.maybe_advance_high_watermark(10)
    state.follower_fetched(2, 7, 10, now_ms=1_100)
    assert state.maybe_advance_high_watermark(10)
    assert state.high_watermark == 7
    state.follower_fetched(2, 5, 10, now_ms=1_200)  # a follower that truncated: the watermark stays
    assert not state.maybe_advance_high_watermark(10)
    assert state.high_watermark == 7


def test_an_unreplicated_leader_moves_the_high_watermark_with_its_log():
    state = leader(isr=(0,), replicas=(0,))
    assert not state.replicated
    assert state.maybe_advance_high_watermark(3) and state.high_watermark == 3


def test_a_follower_not_caught_up_for_the_lag_time_leaves_the_isr():
    state = leader(now=1_000)
    state.follower_fetched(1, 5, 5, now_ms=2_000)
    state.follower_fetched(2, 5, 5, now_ms=2_000)
    # The leader appends; follower 1 keeps up, follower 2 stops fetching.
    state.follower_fetched(1, 8, 8, now_ms=3_000)
    assert state.maybe_shrink_isr(8, now_ms=2_000 + LAG_MS, lag_time_max_ms=LAG_MS) is None
    change = state.maybe_shrink_isr(8, now_ms=2_001 + LAG_MS, lag_time_max_ms=LAG_MS)
    assert change == IsrChange((0, 1), removed=(2,))
    assert state.isr == (0, 1)
    # Without follower 2 the high watermark is follower 1's.
    assert state.maybe_advance_high_watermark(8) and state.high_watermark == 8


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
    assert state.maybe_shrink_isr(20, now_ms=1_001 + LAG_MS, lag_time_max_ms=LAG_MS) == IsrChange((0,), removed=(1,))


def test_a_follower_joins_the_isr_once_it_has_the_high_watermark_and_the_epoch_start():
    state = leader(isr=(0,), leo=4, hw=4)
    assert state.follower_fetched(1, 3, 6, now_ms=1_000) is None
    assert state.follower_fetched(1, 4, 6, now_ms=1_100) == IsrChange((0, 1), added=(1,))
    assert state.isr == (0, 1)
    assert state.follower_fetched(1, 6, 6, now_ms=1_200) is None  # already in
    assert state.follower_fetched(7, 6, 6, now_ms=1_200) is None  # not a replica of the partition


def test_acks_all_completes_at_the_high_watermark_and_counts_the_isr():
    state = leader(isr=(0, 1), replicas=(0, 1, 2))
    assert state.required_offset_reached(5, min_insync_replicas=2) == (False, False)
    state.follower_fetched(1, 5, 5, now_ms=1_000)
    state.maybe_advance_high_watermark(5)
    assert state.required_offset_reached(5, min_insync_replicas=2) == (True, True)
    assert state.required_offset_reached(5, min_insync_replicas=3) == (True, False)
