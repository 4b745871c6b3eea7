"""server/kraft/assignments.py's pure steps: what Kafka 4.4's AssignmentsManager sends in
AssignReplicasToDirs, and what it does with the controller's answer."""

from __future__ import annotations

import uuid

from samsa.server.kraft.assignments import AssignmentsManager
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, response_class

Response = response_class(ApiKey.ASSIGN_REPLICAS_TO_DIRS)
T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
D1, D2 = uuid.UUID(int=101), uuid.UUID(int=102)


def manager(valid=lambda topic_id, partition: True) -> AssignmentsManager:
    return AssignmentsManager(None, 2, lambda: 42, valid)  # type: ignore[arg-type]  # no I/O here


def answer(*partitions: tuple[uuid.UUID, uuid.UUID, int, int], error_code: int = ErrorCode.NONE):
    """(directory, topic id, partition, error code) each."""
    return Response(error_code=error_code, directories=[
        Response.DirectoryData(id=d, topics=[Response.TopicData(topic_id=t, partitions=[
            Response.PartitionData(partition_index=p, error_code=e)])]) for d, t, p, e in partitions])


def test_the_request_groups_partitions_by_directory_then_topic():
    m = manager()
    m.on_assignment(T1, 0, D1)
    m.on_assignment(T1, 1, D1)
    m.on_assignment(T2, 0, D2)
    m.on_assignment(T1, 0, D2)  # a later assignment of the same partition replaces the first
    batch = m.take_batch()
    assert m.ready == {}
    request = m.request(batch, 42)
    assert (request.broker_id, request.broker_epoch) == (2, 42)
    assert sorted((d.id, t.topic_id, [p.partition_index for p in t.partitions])
                  for d in request.directories for t in d.topics) == [(D1, T1, [1]), (D2, T1, [0]), (D2, T2, [0])]


def test_invalid_assignments_are_dropped_and_a_batch_holds_at_most_2250():
    m = manager(valid=lambda topic_id, partition: partition != 7)
    for p in range(2300):
        m.on_assignment(T1, p, D1)
    assert m.delay_ms() == 0  # more than a batch ready: at once
    batch = m.take_batch()
    assert len(batch) == 2250 and (T1, 7) not in batch and len(m.ready) == 2300 - 2251
    assert m.delay_ms() == 100


def test_refused_and_unanswered_assignments_are_queued_again():
    m = manager()
    for p in range(3):
        m.on_assignment(T1, p, D1)
    sent = m.take_batch()
    m.handle_response(sent, answer((D1, T1, 0, ErrorCode.NONE), (D1, T1, 1, ErrorCode.STALE_BROKER_EPOCH)))
    assert m.ready == {(T1, 1): D1, (T1, 2): D1}
    assert m.previous_global_failures == 0


def test_a_failed_request_is_retried_with_a_growing_backoff_and_a_newer_assignment_wins():
    m = manager()
    m.on_assignment(T1, 0, D1)
    sent = m.take_batch()
    m.on_assignment(T1, 0, D2)  # moved meanwhile
    m.handle_response(sent, None)
    assert m.ready == {(T1, 0): D2} and m.delay_ms() == 200
    m.handle_response(m.take_batch(), answer(error_code=ErrorCode.NOT_CONTROLLER))
    assert m.delay_ms() == 400
    for _ in range(10):
        m.handle_response({}, None)
    assert m.delay_ms() == 10_000
    m.handle_response(m.take_batch(), answer((D2, T1, 0, ErrorCode.NONE)))
    assert m.ready == {} and m.delay_ms() == 100
