"""The replica fetcher's side of an incremental fetch session (KIP-227), against the leader's
(FetchSessionCache): what each request carries, and that both sides agree on the session."""

from __future__ import annotations

from samsa.server.replication.fetch_session import CachedPartition, FetchSessionCache
from samsa.server.replication.fetch_session_handler import FetchSessionHandler, PartitionFetch
from samsa.wire.errors import ErrorCode

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def at(offset: int, epoch: int = 1) -> PartitionFetch:
    return PartitionFetch(fetch_offset=offset, current_leader_epoch=epoch, last_fetched_epoch=epoch,
                          log_start_offset=0, max_bytes=1 << 20)


def to_leader(cache: FetchSessionCache, handler: FetchSessionHandler, wanted: dict, now_ms: int = 0,
              candidates=None):
    """Send what the handler builds for `wanted` to the leader's cache; answer as the leader would."""
    request = handler.build(wanted, candidates)
    partitions = [CachedPartition(topic, None, index, f.fetch_offset, f.max_bytes, f.log_start_offset,
                                  f.current_leader_epoch, f.last_fetched_epoch)
                  for (topic, index), f in request.partitions.items()]
    context = cache.new_context(request.session_id, request.epoch, partitions, request.forgotten, now_ms)
    handler.handle_response(request, context.error, context.session_id)
    return request, context


def test_the_first_fetch_names_every_partition_and_opens_a_session():
    cache, handler = FetchSessionCache(10, seed=1), FetchSessionHandler()
    request, context = to_leader(cache, handler, {A: at(0), B: at(0)})
    assert request.full and request.epoch == 0 and set(request.partitions) == {A, B}
    assert context.session_id != 0 and handler.session_id == context.session_id and handler.next_epoch == 1


def test_later_fetches_name_only_what_changed_and_the_leader_keeps_the_rest():
    cache, handler = FetchSessionCache(10, seed=1), FetchSessionHandler()
    to_leader(cache, handler, {A: at(0), B: at(0), C: at(0)})
    request, context = to_leader(cache, handler, {A: at(5), B: at(0), C: at(0)})
    assert not request.full and request.epoch == 1 and request.partitions == {A: at(5)} and not request.forgotten
    assert context.incremental and context.error == ErrorCode.NONE
    assert {(p.topic, p.partition): p.fetch_offset for p in context.partitions} == {A: 5, B: 0, C: 0}

    request, context = to_leader(cache, handler, {A: at(5), B: at(0), C: at(0)})
    assert request.partitions == {} and request.epoch == 2  # nothing moved: an empty request
    assert context.error == ErrorCode.NONE and len(context.partitions) == 3


def test_a_new_leader_epoch_or_last_fetched_epoch_is_a_change():
    cache, handler = FetchSessionCache(10, seed=1), FetchSessionHandler()
    to_leader(cache, handler, {A: at(3, epoch=1)})
    request, context = to_leader(cache, handler, {A: at(3, epoch=2)})
    assert request.partitions == {A: at(3, epoch=2)}
    assert [(p.current_leader_epoch, p.last_fetched_epoch) for p in context.partitions] == [(2, 2)]


def test_a_partition_no_longer_fetched_is_forgotten_and_one_fetched_again_is_sent_whole():
    cache, handler = FetchSessionCache(10, seed=1), FetchSessionHandler()
    to_leader(cache, handler, {A: at(0), B: at(0)})
    request, context = to_leader(cache, handler, {A: at(0)})  # B truncating, or moved away
    assert request.forgotten == [B] and request.partitions == {}
    assert [(p.topic, p.partition) for p in context.partitions] == [A]
    request, context = to_leader(cache, handler, {A: at(0), B: at(7)})
    assert request.partitions == {B: at(7)} and len(context.partitions) == 2


def test_a_session_the_leader_lost_is_opened_again_by_a_full_fetch():
    cache, handler = FetchSessionCache(10, seed=1), FetchSessionHandler()
    to_leader(cache, handler, {A: at(0), B: at(0)})
    cache.remove(handler.session_id)  # evicted, or the leader restarted
    request, context = to_leader(cache, handler, {A: at(1), B: at(0)})
    assert context.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and handler.next_epoch == 0
    request, context = to_leader(cache, handler, {A: at(1), B: at(0)})
    assert request.full and set(request.partitions) == {A, B} and context.error == ErrorCode.NONE
    assert handler.session_id == context.session_id != 0 and handler.next_epoch == 1


def test_a_leader_without_room_for_a_session_gets_full_fetches():
    cache, handler = FetchSessionCache(0), FetchSessionHandler()
    for offset in (0, 1):
        request, context = to_leader(cache, handler, {A: at(offset), B: at(0)})
        assert request.full and set(request.partitions) == {A, B} and context.session_id == 0


def test_reset_after_a_lost_connection_starts_over_with_a_full_fetch():
    cache, handler = FetchSessionCache(10, seed=1), FetchSessionHandler()
    _, opened = to_leader(cache, handler, {A: at(0)})
    handler.build({A: at(4)})  # sent; the connection broke before the answer
    handler.reset()
    request, context = to_leader(cache, handler, {A: at(4)})
    assert request.full and request.session_id == opened.session_id  # the leader replaces that session
    assert context.error == ErrorCode.NONE and context.session_id not in (0, opened.session_id)
    assert opened.session_id not in cache.sessions


def test_a_fetcher_that_names_the_partitions_it_touched_gets_the_same_requests():
    """The replica fetcher passes the partitions that may have changed or gone: only those are
    compared, and the requests are those a comparison of every partition makes."""
    cache, handler = FetchSessionCache(10, seed=1), FetchSessionHandler()
    to_leader(cache, handler, {A: at(0), B: at(0), C: at(0)}, candidates={A, B, C})
    request, _ = to_leader(cache, handler, {A: at(5), B: at(0), C: at(0)}, candidates={A, B})
    assert request.partitions == {A: at(5)} and not request.forgotten
    request, context = to_leader(cache, handler, {A: at(5), C: at(0)}, candidates={B})  # B left
    assert request.partitions == {} and request.forgotten == [B]
    assert {(p.topic, p.partition) for p in context.partitions} == {A, C}
    request, _ = to_leader(cache, handler, {A: at(5), C: at(0)}, candidates=set())
    assert request.partitions == {} and not request.forgotten and request.epoch == 3
