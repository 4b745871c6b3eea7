"""KIP-227 fetch sessions: the bookkeeping of FetchSessionCache, without I/O."""

from samsa.server.replication.fetch_session import CachedPartition, FetchSessionCache
from samsa.wire.errors import ErrorCode


def part(topic="t", partition=0, offset=0):
    return CachedPartition(topic, None, partition, offset, 1 << 20, -1, -1)


def test_sessionless_full_fetch_creates_no_session():
    cache = FetchSessionCache(max_slots=10, seed=1)
    ctx = cache.new_context(0, -1, [part()], [], now_ms=0)
    assert ctx.session_id == 0 and not ctx.incremental
    assert cache.sessions == {}


def test_initial_fetch_opens_session_and_incremental_updates_it():
    cache = FetchSessionCache(max_slots=10, seed=1)
    full = cache.new_context(0, 0, [part(partition=0), part(partition=1)], [], now_ms=0)
    assert full.session_id != 0 and not full.incremental
    inc = cache.new_context(full.session_id, 1, [part(partition=1, offset=5)], [], now_ms=1)
    assert inc.incremental and inc.session_id == full.session_id
    offsets = {(p.topic, p.partition): p.fetch_offset for p in inc.partitions}
    assert offsets == {("t", 0): 0, ("t", 1): 5}
    forgot = cache.new_context(full.session_id, 2, [], [("t", 0)], now_ms=2)
    assert [(p.topic, p.partition) for p in forgot.partitions] == [("t", 1)]


def test_wrong_epoch_and_unknown_session_are_errors():
    cache = FetchSessionCache(max_slots=10, seed=1)
    full = cache.new_context(0, 0, [part()], [], now_ms=0)
    assert cache.new_context(full.session_id, 5, [], [], now_ms=1).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.new_context(full.session_id + 1, 1, [], [], now_ms=1).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_session_keeps_naming_topics_as_it_was_opened():
    """Kafka's FetchManager.newContext: a session opened by Fetch v13+ (topic ids) continued by v12-
    (names), or the other way round, is FETCH_SESSION_TOPIC_ID_ERROR; the epoch is checked first."""
    cache = FetchSessionCache(max_slots=10, seed=1)
    by_id = cache.new_context(0, 0, [part()], [], now_ms=0, uses_topic_ids=True)
    by_name = cache.new_context(0, 0, [part()], [], now_ms=0, uses_topic_ids=False)
    assert cache.new_context(by_id.session_id, 1, [], [], now_ms=1).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert cache.new_context(by_name.session_id, 1, [], [], now_ms=1,
                             uses_topic_ids=True).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert cache.new_context(by_id.session_id, 2, [], [], now_ms=1,
                             uses_topic_ids=False).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.new_context(by_id.session_id, 1, [], [], now_ms=1, uses_topic_ids=True).incremental


def test_final_epoch_closes_session():
    cache = FetchSessionCache(max_slots=10, seed=1)
    full = cache.new_context(0, 0, [part()], [], now_ms=0)
    closed = cache.new_context(full.session_id, -1, [part()], [], now_ms=1)
    assert closed.session_id == 0 and full.session_id not in cache.sessions


def test_full_cache_evicts_only_idle_sessions():
    cache = FetchSessionCache(max_slots=1, eviction_ms=100, seed=1)
    first = cache.new_context(0, 0, [part()], [], now_ms=0)
    busy = cache.new_context(0, 0, [part()], [], now_ms=50)
    assert busy.session_id == 0  # no slot: served sessionless
    later = cache.new_context(0, 0, [part()], [], now_ms=200)
    assert later.session_id not in (0, first.session_id) and first.session_id not in cache.sessions


def test_incremental_response_includes_only_changes():
    p = part()
    assert p.needs_response(10, 10, 0, has_records=False, error=ErrorCode.NONE)  # first time
    assert not p.needs_response(10, 10, 0, has_records=False, error=ErrorCode.NONE)
    assert p.needs_response(10, 10, 0, has_records=True, error=ErrorCode.NONE)
    assert p.needs_response(11, 11, 0, has_records=False, error=ErrorCode.NONE)
    assert p.needs_response(11, 11, 3, has_records=False, error=ErrorCode.NONE)
    assert p.needs_response(11, 11, 3, has_records=False, error=ErrorCode.OFFSET_OUT_OF_RANGE)
