"""The storage layer's exceptions, named after Kafka's, each carrying the protocol error code the
server answers with, so a handler maps any of them with `exc.error_code`."""

from __future__ import annotations

from ..wire.errors import ErrorCode


class StorageError(Exception):
    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    # (index of the record in its batch, why it was refused): Produce's record_errors.
    record_errors: tuple[tuple[int, str], ...] = ()


class CorruptRecordException(StorageError):
    """Record data that fails its size, magic or CRC check."""
    error_code = ErrorCode.CORRUPT_MESSAGE


class RecordTooLargeException(StorageError):
    """A batch larger than max.message.bytes."""
    error_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLargeException(StorageError):
    """An append larger than segment.bytes: it could never fit in a segment."""
    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class InvalidRecordException(StorageError):
    error_code = ErrorCode.INVALID_RECORD

    @classmethod
    def of_records(cls, record_errors: list[tuple[int, str]]) -> InvalidRecordException:
        """Kafka's RecordValidationException: the records at fault, and a message naming the first three."""
        shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')"
                          for index, message in record_errors[:3])
        error = cls(f"One or more records have been rejected due to {len(record_errors)} record errors in total, "
                    f"and only showing the first three errors at most: [{shown}]")
        error.record_errors = tuple(record_errors)
        return error


class InvalidTimestampException(StorageError):
    error_code = ErrorCode.INVALID_TIMESTAMP


class UnsupportedForMessageFormatException(StorageError):
    error_code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class UnsupportedCompressionTypeException(StorageError):
    """Records in a codec their message format cannot carry (zstd in magic 0/1)."""
    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class OffsetOutOfRangeException(StorageError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class PolicyViolationException(StorageError):
    """DeleteRecords on a topic whose cleanup.policy does not include delete."""
    error_code = ErrorCode.POLICY_VIOLATION


class OutOfOrderSequenceException(StorageError):
    """An idempotent producer's batch whose first sequence does not follow the last one written."""
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochException(StorageError):
    """A batch from an older epoch of its producer id. Since Kafka 2.7 (KIP-588) a produce gets
    INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED, whatever its version: the client may abort and retry."""
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateException(StorageError):
    """A transactional batch outside a transaction the coordinator knows of, or a plain batch from
    a producer whose transaction is open."""
    error_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedException(StorageError):
    """A transaction marker from a coordinator epoch older than one already seen for its producer."""
    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class CorruptSnapshotException(StorageError):
    """A producer state snapshot that fails its version or CRC check; it is deleted and the state
    rebuilt from the log."""
    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class KafkaStorageException(StorageError):
    """An I/O failure of the log directory: the partition is offline on this broker."""
    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class InconsistentTopicIdException(KafkaStorageException):
    """A partition directory whose partition.metadata names another topic id than the topic's:
    the log of a deleted topic of the same name, which is not opened."""
    error_code = ErrorCode.INCONSISTENT_TOPIC_ID


class LogDirNotFoundException(StorageError):
    """A log directory that is not one of the broker's log.dirs (AlterReplicaLogDirs)."""
    error_code = ErrorCode.LOG_DIR_NOT_FOUND


class CorruptIndexException(StorageError):
    """An offset or time index that fails its sanity check; it is rebuilt from the log."""
    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class InvalidConfigurationException(StorageError, ValueError):
    """A topic config with an unknown name or a value outside its valid range."""
    error_code = ErrorCode.INVALID_CONFIG

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def caused_by_io_error(exc: BaseException) -> bool:
    """An OSError, or an error raised for one: what takes a log directory offline (a refusal such
    as rolling onto an existing segment does not)."""
    return isinstance(exc, OSError) or isinstance(exc.__cause__, OSError)
