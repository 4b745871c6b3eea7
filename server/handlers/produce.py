"""Produce (key 0), v0-11: append each partition's record batch to its log. Follows
KafkaApis.handleProduceRequest, ReplicaManager.appendRecords and LogValidator: the records stay the
bytes the client sent (offsets written into the batch header in place), re-encoded only for message
format v0/v1 (Produce v0-2, up-converted) or a topic compression.type unlike the batch's.
Deviations: v0-2 are served as in Kafka 3.9 (Kafka 4.0 removed them, KIP-896); acks=all waits for no
follower (this broker is the whole ISR); internal topics are refused even to the `__admin_client`
client id, which Kafka lets write them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import trio

from ...storage.errors import StorageError
from ...wire import legacy
from ...wire import records as batches
from ...wire.errors import ErrorCode
from ...wire.exceptions import CodecError
from ...wire.protocol import ApiKey, response_class
from ..authorizer import TOPIC, TRANSACTIONAL_ID, WRITE
from ..network import ConnectionClosed
from ..replica_manager import let_woken_fetches_answer
from ..throttle import not_request_time, record_produce
from . import handler

log = logging.getLogger("samsa.produce")
ProduceResponse = response_class(ApiKey.PRODUCE)
TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
BatchIndexAndErrorMessage = ProduceResponse.BatchIndexAndErrorMessage

COMPRESSION_CODES = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class InvalidRecord(Exception):
    """Record data the request may not carry (Kafka's InvalidRecordException)."""


def v2_batch(records, api_version: int):
    """The records of one partition as one v2 batch (bytes the log can take) and its header, or raise."""
    if records is None or len(records) == 0:
        raise InvalidRecord("Produce request has no records for the partition")
    magic = batches.peek_magic(records)
    if api_version <= 2:
        if magic == 2:
            raise InvalidRecord("Produce request v0-2 cannot carry message format v2")
        converted = bytearray(legacy.up_convert(records))
        return converted, batches.parse_batch_header(converted)
    if magic != 2:
        raise InvalidRecord(f"Produce requests v3+ carry message format v2 only, found magic {magic}")
    header = batches.parse_batch_header(records)
    if header.size != len(records):
        raise InvalidRecord("Produce requests v3+ are only allowed to contain exactly one record batch")
    return records, header


def apply_topic_compression(records, compression_type: str):
    if compression_type == "producer":
        return records
    target = COMPRESSION_CODES[compression_type]
    header = batches.parse_batch_header(records)
    if header.compression == target:
        return records
    return bytearray(batches.recompress_batch(records, 0, target))


def partition_error(index: int, code: int, message: str | None = None):
    return PartitionResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                             log_start_offset=-1, error_message=message)


@dataclass
class AfterAppends:
    """What a Produce does once its partitions are appended, before it answers."""
    logs_to_flush: list = field(default_factory=list)  # flush.messages reached or a segment rolled
    woke_fetches: bool = False


def append_partition(ctx, topic_name: str, data, acks: int, after: AfterAppends,
                     transactional_id: str | None = None):
    partition = ctx.services.replica_manager.get(topic_name, data.index)
    if partition is None:
        return partition_error(data.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if partition.topic.is_internal:
        return partition_error(data.index, ErrorCode.INVALID_TOPIC_EXCEPTION)
    config = partition.log.config
    if acks == -1 and config.min_insync_replicas > 1:
        return partition_error(data.index, ErrorCode.NOT_ENOUGH_REPLICAS)
    try:
        records, header = v2_batch(data.records, ctx.api_version)
        if header.is_transactional:
            refused = ctx.services.transactions.verify_append(transactional_id, header, topic_name, data.index,
                                                              ctx.api_version)
            if refused is not None:
                return partition_error(data.index, *refused)
        records = apply_topic_compression(records, config.compression_type)
        after.woke_fetches |= partition.has_parked_fetches  # the append wakes them
        info = partition.append(records)
        if info.flush_needed:
            after.logs_to_flush.append(partition.log)
    except InvalidRecord as e:
        return partition_error(data.index, ErrorCode.INVALID_RECORD, str(e))
    except legacy.UnsupportedCompressionTypeError as e:
        return partition_error(data.index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(e))
    except CodecError as e:  # CorruptRecordError and malformed legacy message sets alike
        return partition_error(data.index, ErrorCode.CORRUPT_MESSAGE, str(e))
    except StorageError as e:
        log.debug("append to %s-%d refused: %s", topic_name, data.index, e)
        response = partition_error(data.index, e.error_code, str(e))
        response.record_errors = [BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=message)
                                  for index, message in e.record_errors]
        return response
    return PartitionResponse(index=data.index, error_code=ErrorCode.NONE, base_offset=info.first_offset,
                             log_append_time_ms=info.log_append_time, log_start_offset=info.log_start_offset)


def transaction_unauthorized(ctx, request) -> bool:
    """Kafka's check before any append: transactional records need WRITE on their transactional id.
    Batch headers are read only when an authorizer is configured."""
    if ctx.services.authorizer is None:
        return False
    transactional = any(p.records is not None and len(p.records) >= batches.BATCH_HEADER_SIZE
                        and batches.peek_magic(p.records) == 2 and batches.parse_batch_header(p.records).is_transactional
                        for t in request.topic_data for p in t.partition_data)
    return transactional and not (request.transactional_id is not None
                                  and ctx.authorize(WRITE, TRANSACTIONAL_ID, request.transactional_id))


@handler(ApiKey.PRODUCE, 0, 11)
async def handle(ctx, request):
    acks = request.acks
    responses = []
    after = AfterAppends()
    transaction_refused = transaction_unauthorized(ctx, request)
    for topic in request.topic_data:
        if transaction_refused:
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not ctx.authorize(WRITE, TOPIC, topic.name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif acks not in (-1, 0, 1):
            code = ErrorCode.INVALID_REQUIRED_ACKS
        else:
            code = ErrorCode.NONE
        if code == ErrorCode.NONE:
            parts = [append_partition(ctx, topic.name, p, acks, after, request.transactional_id)
                     for p in topic.partition_data]
        else:
            parts = [partition_error(p.index, code) for p in topic.partition_data]
        responses.append(TopicResponse(name=topic.name, partition_responses=parts))
    if after.woke_fetches:
        with not_request_time(ctx):  # their time is theirs, not this request's
            await let_woken_fetches_answer()
    for log_ in after.logs_to_flush:
        # fsync off the event loop before answering.
        await trio.to_thread.run_sync(log_.flush, limiter=ctx.services.disk_limiter)
    record_produce(ctx, acks)  # appended first, throttled after: the data is kept either way
    if acks == 0:
        # No response at all. A failed acks=0 produce closes the connection, as Kafka does, so
        # that the client notices and refreshes its metadata.
        if any(p.error_code != ErrorCode.NONE for t in responses for p in t.partition_responses):
            raise ConnectionClosed("acks=0 produce failed")
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
