"""Share sessions (server/share/share_session_cache.py) as Kafka 4.4's ShareSessionCache and
SharePartitionManager.newContext keep them: epochs, incremental partition sets, the session limit,
and what a closed connection does."""

from __future__ import annotations

import uuid

import pytest

from samsa.server.share.share_session_cache import (
    FinalContext,
    ShareSessionCache,
    ShareSessionContext,
    ShareSessionError,
    TopicIdPartition,
    next_epoch,
)
from samsa.wire.errors import ErrorCode

T = uuid.uuid4()
A, B, C = (TopicIdPartition(T, i, "t") for i in range(3))
UNKNOWN = TopicIdPartition(uuid.uuid4(), 0, None)


def error_of(fn, *args) -> int:
    with pytest.raises(ShareSessionError) as raised:
        fn(*args)
    return raised.value.error_code


class Listener:
    def __init__(self, cache: ShareSessionCache) -> None:
        self.cache = cache
        self.events: list[tuple[str, ...]] = []

    def on_member_leave(self, group_id, member_id):
        self.events.append(("leave", group_id, member_id))
        self.cache.remove(group_id, member_id)  # as SharePartitionManager.releaseSession does

    def on_group_empty(self, group_id):
        self.events.append(("empty", group_id))


def test_next_epoch_wraps_to_one_and_keeps_the_final_epoch():
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(-1) == -1


def test_epoch_zero_opens_a_session_whose_epochs_follow_each_request():
    cache = ShareSessionCache(10)
    context = cache.new_context("g", "m", 0, [A, B], [], False, "c1")
    assert isinstance(context, ShareSessionContext) and not context.is_subsequent
    assert context.erroneous_and_valid().valid == [A, B]
    assert cache.get("g", "m").epoch == 1
    assert error_of(cache.new_context, "g", "m", 2, [], [], False, "c1") == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    context = cache.new_context("g", "m", 1, [], [], False, "c1")
    assert context.is_subsequent and cache.get("g", "m").epoch == 2
    # A ShareAcknowledge moves the epoch too; it cannot open a session.
    cache.acknowledge_session_update("g", "m", 2)
    assert cache.get("g", "m").epoch == 3
    assert error_of(cache.acknowledge_session_update, "g", "m", 0) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert error_of(cache.acknowledge_session_update, "g", "other", 3) == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_unknown_sessions_and_acknowledgements_opening_a_session_are_refused():
    cache = ShareSessionCache(10)
    assert error_of(cache.new_context, "g", "m", 1, [A], [], False, "c") == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert error_of(cache.new_context, "g", "m", -1, [], [], False, "c") == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert error_of(cache.new_context, "g", "m", 0, [A], [], True, "c") == ErrorCode.INVALID_REQUEST
    cache.new_context("g", "m", 0, [A], [], False, "c")
    assert isinstance(cache.new_context("g", "m", -1, [], [], True, "c"), FinalContext)
    assert FinalContext().erroneous_and_valid().valid == []


def test_a_subsequent_fetch_reads_the_whole_session_and_answers_only_partitions_with_news():
    cache = ShareSessionCache(10)
    cache.new_context("g", "m", 0, [A, B], [], False, "c")
    context = cache.new_context("g", "m", 1, [C, UNKNOWN], [A], False, "c")
    erroneous, valid = context.erroneous_and_valid()
    assert valid == [B, C] and erroneous == {UNKNOWN: ErrorCode.UNKNOWN_TOPIC_ID}
    assert cache.total_partitions == 3
    updates = {B: (False, ErrorCode.NONE), C: (False, ErrorCode.NONE), UNKNOWN: (False, ErrorCode.UNKNOWN_TOPIC_ID)}
    # C was added by this request and UNKNOWN answers an error: named; B has nothing to say.
    assert context.response_partitions(updates) == (ErrorCode.NONE, [C, UNKNOWN])
    context = cache.new_context("g", "m", 2, [], [], False, "c")
    updates = {B: (True, ErrorCode.NONE), C: (False, ErrorCode.NONE), UNKNOWN: (False, ErrorCode.NONE)}
    # UNKNOWN is named once more after its error (it may be fine now); B has records.
    assert context.response_partitions(updates) == (ErrorCode.NONE, [B, UNKNOWN])
    # B answered records: it moves to the end, so the others are read first next time.
    assert list(cache.get("g", "m").partitions) == [C.key, UNKNOWN.key, B.key]


def test_a_response_whose_session_moved_on_meanwhile_is_an_epoch_error():
    cache = ShareSessionCache(10)
    cache.new_context("g", "m", 0, [A], [], False, "c")
    context = cache.new_context("g", "m", 1, [], [], False, "c")
    cache.acknowledge_session_update("g", "m", 2)  # a ShareAcknowledge raced the fetch
    assert context.response_partitions({A: (True, ErrorCode.NONE)}) == (ErrorCode.INVALID_SHARE_SESSION_EPOCH, [])
    assert context.throttled_error() == ErrorCode.INVALID_SHARE_SESSION_EPOCH


def test_sessions_past_the_limit_are_refused_and_a_member_reopening_replaces_its_own():
    cache = ShareSessionCache(2)
    cache.new_context("g", "m1", 0, [A], [], False, "c1")
    cache.new_context("g", "m2", 0, [A], [], False, "c2")
    assert error_of(cache.new_context, "g", "m3", 0, [A], [], False, "c3") == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    cache.new_context("g", "m1", 0, [A, B], [], False, "c1")  # replaces m1's session: no new slot
    assert len(cache) == 2 and cache.members("g") == 2 and cache.total_partitions == 3


def test_a_closed_connection_ends_its_member_and_then_its_group():
    cache = ShareSessionCache(10)
    listener = Listener(cache)
    cache.listener = listener
    cache.new_context("g", "m1", 0, [A], [], False, "c1")
    cache.new_context("g", "m2", 0, [A], [], False, "c2")
    cache.connection_closed("c1")
    assert listener.events == [("leave", "g", "m1")] and cache.get("g", "m1") is None and cache.evictions == 1
    cache.connection_closed("c2")
    assert listener.events[1:] == [("leave", "g", "m2"), ("empty", "g")]
    cache.connection_closed("c2")  # once
    assert len(listener.events) == 3


def test_a_session_closed_before_its_connection_is_not_left_again():
    cache = ShareSessionCache(10)
    listener = Listener(cache)
    cache.listener = listener
    cache.new_context("g", "m", 0, [A], [], False, "c")
    cache.remove("g", "m")  # closed with epoch -1
    cache.connection_closed("c")
    assert listener.events == [("empty", "g")]
