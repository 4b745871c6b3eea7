"""Produce (key 0), v0-13: append each partition's record batch to its log. Follows
KafkaApis.handleProduceRequest and ReplicaManager.appendRecords: each partition's batch header is
parsed once (storage.log_validator), then the partition's log appends it; the records stay the bytes
the client sent (offsets written into the batch header in place) unless storage re-encodes them, as
Kafka's LogValidator does, for message format v0/v1 (Produce v0-2) or a topic compression.type
unlike the batch's.
acks=all on a replicated partition waits (Kafka's DelayedProduce) until the high watermark passes
what was appended, at most the request's timeout_ms; an ISR smaller than min.insync.replicas (at most
the replica count: Kafka 4.4's effectiveMinIsr) refuses the append (NOT_ENOUGH_REPLICAS), or fails it
once replicated (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
A transactional batch of v12+ comes from a producer of transaction version 2 (KIP-890 part 2), which
sends no AddPartitionsToTxn: the partitions are added to its transaction here, before the appends
(Kafka's AddPartitionsToTxnManager, verifyOnly false); older versions are only verified (KIP-890
part 1). Either way the partition first makes the producer's verification guard (Kafka's
maybeStartTransactionVerification), which its append brings back. v13 names topics by id (KIP-516): an unknown one is UNKNOWN_TOPIC_ID. A ZooKeeper cluster
serves v0-11, as Kafka 3.9.
Deviations: v0-2 are served as in Kafka 3.9 (Kafka 4.0 removed them, KIP-896); internal topics are
refused even to the `__admin_client` client id, which Kafka lets write them.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field

import trio

from ...storage.errors import (
    InvalidProducerEpochException, InvalidRecordException, InvalidTxnStateException, OutOfOrderSequenceException,
    StorageError,
)
from ...storage.producer_state import SENTINEL_GUARD
from ...storage.log_validator import ProducedRecords, parse_produced_records
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import TOPIC, TRANSACTIONAL_ID, WRITE
from ..replication.replica_manager import let_woken_fetches_answer
from ..context import CloseConnection, DelayedResponse
from ..coordinators.txn_service import FIRST_PRODUCE_VERSION_ADDING_PARTITIONS, produce_verification_error
from ..throttle import not_request_time, produce_throttled, record_produce
from . import handler

log = logging.getLogger("samsa.produce")
ProduceResponse = response_class(ApiKey.PRODUCE)
TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
BatchIndexAndErrorMessage = ProduceResponse.BatchIndexAndErrorMessage
FIRST_TOPIC_ID_VERSION = 13


def produced_records(records, api_version: int) -> ProducedRecords:
    """A partition's records parsed, the one time they are, and checked against the request's
    version (Kafka's ProduceRequest.validateRecords): v0-2 carry message format v0/v1, v3+ exactly
    one v2 batch."""
    if records is None or len(records) == 0:
        raise InvalidRecordException("Produce request has no records for the partition")
    produced = parse_produced_records(records)
    # The records have a (v2 batch) header exactly when their magic is 2.
    if api_version <= 2:
        if produced.header is not None:
            raise InvalidRecordException("Produce request v0-2 cannot carry message format v2")
    elif produced.header is None:
        raise InvalidRecordException(f"Produce requests v3+ carry message format v2 only, found magic {produced.magic}")
    elif produced.header.size != len(records):
        raise InvalidRecordException("Produce requests v3+ are only allowed to contain exactly one record batch")
    return produced


def parse_partitions(request, api_version: int) -> list[list[ProducedRecords | StorageError]]:
    """Every partition's records parsed, or why they cannot be, by topic then partition."""
    parsed = []
    for topic in request.topic_data:
        row: list[ProducedRecords | StorageError] = []
        for p in topic.partition_data:
            try:
                row.append(produced_records(p.records, api_version))
            except StorageError as e:
                row.append(e)
        parsed.append(row)
    return parsed


def partition_error(index: int, code: int, message: str | None = None):
    return PartitionResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                             log_start_offset=-1, error_message=message)


@dataclass
class AfterAppends:
    """What a Produce does once its partitions are appended, before it answers."""
    logs_to_flush: list = field(default_factory=list)  # flush.messages reached or a segment rolled
    woke_fetches: bool = False
    # acks=all on replicated partitions: (partition, offset the ISR must reach, leader epoch, response)
    awaiting_replication: list = field(default_factory=list)


# The producer state's refusals, which Kafka's ReplicaManager.appendToLocalLog answers as any
# unexpected error: no message, the partition's log start offset.
_PRODUCER_STATE_ERRORS = (OutOfOrderSequenceException, InvalidProducerEpochException, InvalidTxnStateException)


def storage_error(index: int, e: StorageError, partition=None):
    if isinstance(e, _PRODUCER_STATE_ERRORS) and partition is not None:
        return PartitionResponse(index=index, error_code=e.error_code, base_offset=-1, log_append_time_ms=-1,
                                 log_start_offset=partition.log.log_start_offset, error_message=None)
    response = partition_error(index, e.error_code, str(e))
    response.record_errors = [BatchIndexAndErrorMessage(batch_index=batch_index, batch_index_error_message=message)
                              for batch_index, message in e.record_errors]
    return response


def start_verification(partition, produced: ProducedRecords, supports_epoch_bump: bool) -> int:
    """The partition's verification guard for a transactional batch about to be checked with its
    coordinator (SENTINEL_GUARD: its transaction is open here, nothing to check); raises
    InvalidProducerEpochException for a producer older than the partition's (Kafka's
    ReplicaManager.maybeStartTransactionVerificationForPartition)."""
    header = produced.header
    assert header is not None, "a transactional batch is a v2 batch"
    return partition.log.maybe_start_transaction_verification(header.producer_id, header.base_sequence,
                                                              header.producer_epoch, supports_epoch_bump)


def append_partition(ctx, topic_name: str, data, produced: ProducedRecords | StorageError, acks: int,
                     after: AfterAppends, transactional_id: str | None = None,
                     added: dict[tuple[str, int], tuple[int, int | None]] | None = None):
    """`added`: v12+, for each partition added to the transaction the coordinator's answer and the
    verification guard its append brings back (None: none required)."""
    partition = ctx.services.replica_manager.get(topic_name, data.index)
    if partition is None:
        return partition_error(data.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if partition.topic.is_internal:
        return partition_error(data.index, ErrorCode.INVALID_TOPIC_EXCEPTION)
    code = partition.check_leader()
    if code != ErrorCode.NONE:
        return partition_error(data.index, code)
    if acks == -1 and len(partition.isr) < partition.effective_min_isr:
        return partition_error(data.index, ErrorCode.NOT_ENOUGH_REPLICAS)
    if isinstance(produced, StorageError):
        return storage_error(data.index, produced)
    guard = None
    try:
        if produced.is_transactional:
            if added is not None:
                error, guard = added.get((topic_name, data.index), (ErrorCode.NONE, None))
                refused = None if error == ErrorCode.NONE else produce_verification_error(error, ctx.api_version)
            elif transactional_id is not None and ctx.services.transactions.verifies(transactional_id):
                try:
                    guard = start_verification(partition, produced, supports_epoch_bump=False)
                except InvalidProducerEpochException:
                    # Kafka answers it as a verification error: no message, no log start offset.
                    return partition_error(data.index, ErrorCode.INVALID_PRODUCER_EPOCH)
                refused = None if guard == SENTINEL_GUARD else ctx.services.transactions.verify_append(
                    transactional_id, produced.header, topic_name, data.index, ctx.api_version)
            else:
                refused = None
            if refused is not None:
                return partition_error(data.index, *refused)
        after.woke_fetches |= partition.has_parked_fetches  # the append wakes them
        info = partition.append(produced, verification_guard=guard)
        if info.flush_needed:
            after.logs_to_flush.append(partition.log)
    except StorageError as e:
        log.debug("append to %s-%d refused: %s", topic_name, data.index, e)
        return storage_error(data.index, e, partition)
    response = PartitionResponse(index=data.index, error_code=ErrorCode.NONE, base_offset=info.first_offset,
                                 log_append_time_ms=info.log_append_time, log_start_offset=info.log_start_offset)
    if acks == -1 and partition.leader_state is not None:
        after.awaiting_replication.append((partition, info.last_offset + 1, partition.leader_epoch, response))
    return response


def replication_settled(waiting: list) -> list:
    """The entries of `waiting` whose records the ISR does not all have yet; the others' responses
    get their outcome (Kafka's DelayedProduce.tryComplete)."""
    still = []
    for entry in waiting:
        partition, required_offset, leader_epoch, response = entry
        code = partition.replication_done(required_offset, leader_epoch)
        if code is None:
            still.append(entry)
        elif code != ErrorCode.NONE:
            response.error_code = code
    return still


async def await_replication(waiting: list, timeout_at: float) -> None:
    """Kafka's DelayedProduce: each partition's response waits until the ISR has its records (the
    high watermark passed them), the partition's leadership moved, or the trio time `timeout_at`
    passed (REQUEST_TIMED_OUT; the request's timeout counts from its append). A partition's wake
    (an append, a follower's fetch moving the high watermark, a LeaderAndIsr) is the moment to
    look again. `waiting`: entries `replication_settled` left, looked at again first: a delayed
    response begins to wait only once those before it on its connection are answered."""
    with trio.move_on_at(timeout_at):
        while True:
            waiting[:] = replication_settled(waiting)
            if not waiting:
                break
            wake = trio.Event()
            for partition, *_ in waiting:
                partition.park(wake)
            try:
                await wake.wait()
            finally:
                for partition, *_ in waiting:
                    partition.unpark(wake)
    for _, _, _, response in waiting:
        response.error_code = ErrorCode.REQUEST_TIMED_OUT


def transaction_unauthorized(ctx, request, produced: list[list[ProducedRecords | StorageError]]) -> bool:
    """Kafka's check before any append: transactional records need WRITE on their transactional id."""
    if ctx.services.authorizer is None:
        return False
    transactional = any(isinstance(p, ProducedRecords) and p.is_transactional for topic in produced for p in topic)
    return transactional and not (request.transactional_id is not None
                                  and ctx.authorize(WRITE, TRANSACTIONAL_ID, request.transactional_id))


def topic_names(ctx, request) -> list[str | None]:
    """Each topic's name; v13+ names topics by id, None for an unknown one."""
    if ctx.api_version < FIRST_TOPIC_ID_VERSION:
        return [topic.name for topic in request.topic_data]
    by_id = ctx.services.metadata_cache.topics_by_id
    return [getattr(by_id.get(topic.topic_id), "name", None) for topic in request.topic_data]


def topic_accepted(ctx, name: str, acks: int) -> int:
    """Whether a topic's partitions may be appended: the error all of them get otherwise."""
    if not ctx.authorize(WRITE, TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if acks not in (-1, 0, 1):
        return ErrorCode.INVALID_REQUIRED_ACKS
    return ErrorCode.NONE


async def add_to_transaction(ctx, request, names: list[str | None], accepted: list[int],
                             produced: list[list[ProducedRecords | StorageError]]
                             ) -> dict[tuple[str, int], tuple[int, int | None]]:
    """v12+: the partitions of the request's transactional batches added to the producer's
    transaction (version 2) before anything is appended, as Kafka's ReplicaManager: each partition
    first makes its verification guard (refusing an older producer epoch at once); those whose
    transaction is already open here are not sent to the coordinator. By partition, the error and
    the guard the append must bring back (None unless transaction.partition.verification.enable)."""
    transactional_id = request.transactional_id
    if transactional_id is None:
        return {}
    services = ctx.services
    required = services.transactions.verifies(transactional_id)
    header = None
    results: dict[tuple[str, int], tuple[int, int | None]] = {}
    to_add = []
    for topic, name, code, topic_produced in zip(request.topic_data, names, accepted, produced):
        if name is None or code != ErrorCode.NONE:
            continue
        for p, parsed in zip(topic.partition_data, topic_produced):
            partition = services.replica_manager.get(name, p.index)
            if (not isinstance(parsed, ProducedRecords) or not parsed.is_transactional or partition is None
                    or partition.topic.is_internal or partition.check_leader() != ErrorCode.NONE):
                continue
            header = header or parsed.header
            try:
                guard = start_verification(partition, parsed, supports_epoch_bump=True)
            except StorageError as e:
                results[(name, p.index)] = (e.error_code, None)
                continue
            results[(name, p.index)] = (ErrorCode.NONE, guard if required else None)
            if guard != SENTINEL_GUARD:
                to_add.append((name, p.index))
    if to_add and header is not None:
        errors = await services.transactions.add_for_produce(transactional_id, header.producer_id,
                                                             header.producer_epoch, to_add)
        for tp, error in errors.items():
            results[tp] = (error, results[tp][1])
    return results


@handler(ApiKey.PRODUCE, 0, 13, zk_max_version=11)
async def handle(ctx, request):
    acks = request.acks
    responses = []
    after = AfterAppends()
    produced = parse_partitions(request, ctx.api_version)
    transaction_refused = transaction_unauthorized(ctx, request, produced)
    names = topic_names(ctx, request)
    accepted = [ErrorCode.NONE if name is None or transaction_refused else topic_accepted(ctx, name, acks)
                for name in names]
    added = None
    if ctx.api_version >= FIRST_PRODUCE_VERSION_ADDING_PARTITIONS and not transaction_refused:
        added = await add_to_transaction(ctx, request, names, accepted, produced)
    for topic, name, accepted_code, topic_produced in zip(request.topic_data, names, accepted, produced):
        if name is None:
            responses.append(TopicResponse(topic_id=topic.topic_id, partition_responses=[
                partition_error(p.index, ErrorCode.UNKNOWN_TOPIC_ID) for p in topic.partition_data]))
            continue
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if transaction_refused else accepted_code
        if code == ErrorCode.NONE:
            parts = [append_partition(ctx, name, p, produced_partition, acks, after, request.transactional_id, added)
                     for p, produced_partition in zip(topic.partition_data, topic_produced)]
        else:
            parts = [partition_error(p.index, code) for p in topic.partition_data]
        responses.append(TopicResponse(name=name, topic_id=topic.topic_id, partition_responses=parts))
    for log_ in after.logs_to_flush:
        # fsync off the event loop before answering (the fetches the appends woke answer meanwhile).
        await trio.to_thread.run_sync(log_.flush, limiter=ctx.services.disk_limiter)
    # acks=all: what the ISR has already (an ISR of the leader alone) is answered without a wait;
    # the rest parks at once, nothing between this look and the park yielding.
    waiting = replication_settled(after.awaiting_replication)
    if after.woke_fetches and not (waiting or after.logs_to_flush):
        # Only when nothing here yields anyway: a produce waiting for its followers lets the fetches
        # it woke answer first as well, without two more passes through the scheduler.
        with not_request_time(ctx):  # their time is theirs, not this request's
            await let_woken_fetches_answer()
    timeout_at = trio.current_time() + max(request.timeout_ms, 0) / 1000
    if waiting and not produce_throttled(ctx):
        # Appended: the connection may read its next acks=all produce while this one waits
        # (Kafka's would wait; server/network/in_order_responses.py tells why that is the same to
        # a client). Under quotas the next request waits, for this one's throttle to mute it.
        return DelayedResponse(functools.partial(answer, ctx, acks, responses, waiting, timeout_at))
    return await answer(ctx, acks, responses, waiting, timeout_at)


async def answer(ctx, acks: int, responses: list, waiting: list, timeout_at: float):
    """The response once the ISR has what `waiting` awaits (or `timeout_at` passed)."""
    if waiting:
        with not_request_time(ctx):  # waiting for the followers is not this broker's work
            await await_replication(waiting, timeout_at)
    record_produce(ctx, acks)  # appended first, throttled after: the data is kept either way
    if acks == 0:
        # No response at all. A failed acks=0 produce closes the connection, as Kafka does, so
        # that the client notices and refreshes its metadata.
        if any(p.error_code != ErrorCode.NONE for t in responses for p in t.partition_responses):
            raise CloseConnection("acks=0 produce failed")
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
