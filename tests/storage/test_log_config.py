import dataclasses

import pytest

from samsa.storage.errors import InvalidConfigurationException
from samsa.storage.log_config import LONG_MAX, LogConfig
from samsa.storage.topic_config_defs import TOPIC_CONFIGS
from samsa.wire.errors import ErrorCode


def test_kafka_defaults():
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.segment_jitter_ms == 0
    assert config.segment_index_bytes == 10485760
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 604800000
    assert config.retention_bytes == -1
    assert config.flush_messages == LONG_MAX and config.flush_ms == LONG_MAX
    assert config.max_message_bytes == 1048588
    assert config.message_timestamp_type == "CreateTime"
    assert config.compression_type == "producer"
    assert config.cleanup_policy == ("delete",)
    assert config.file_delete_delay_ms == 60000
    assert config.min_insync_replicas == 1
    assert config.preallocate is False
    assert config.delete and not config.compact


def test_every_topic_config_has_a_field():
    assert {f.metadata["name"] for f in dataclasses.fields(LogConfig)} == set(TOPIC_CONFIGS)


def test_from_props_parses_kafka_names_and_types():
    config = LogConfig.from_props({
        "segment.bytes": " 1048576 ", "retention.ms": "-1", "cleanup.policy": "compact, delete",
        "preallocate": "TRUE", "min.cleanable.dirty.ratio": "0.25", "message.timestamp.type": "LogAppendTime",
    })
    assert config.segment_bytes == 1048576
    assert config.retention_ms == -1
    assert config.cleanup_policy == ("compact", "delete")
    assert config.compact and config.delete
    assert config.preallocate is True
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.message_timestamp_type == "LogAppendTime"


def test_from_props_overrides_a_base():
    base = LogConfig(retention_ms=1000, segment_ms=5000)
    config = LogConfig.from_props({"segment.ms": "7000"}, base)
    assert (config.retention_ms, config.segment_ms) == (1000, 7000)


@pytest.mark.parametrize("name, value", [
    ("segment.bytes", "13"),  # below LegacyRecord.RECORD_OVERHEAD_V0
    ("segment.bytes", "2147483648"),  # not an int32
    ("segment.bytes", "1e6"),
    ("segment.bytes", "1_000_000"),
    ("retention.ms", "-2"),
    ("flush.messages", "0"),
    ("cleanup.policy", "delete,forever"),
    ("compression.type", "brotli"),
    ("compression.gzip.level", "0"),
    ("compression.zstd.level", "23"),
    ("message.timestamp.type", "createtime"),
    ("min.cleanable.dirty.ratio", "1.5"),
    ("preallocate", "yes"),
    ("leader.replication.throttled.replicas", "0:1,x"),
])
def test_from_props_rejects_bad_values_naming_the_key(name, value):
    with pytest.raises(ValueError, match=name) as info:
        LogConfig.from_props({name: value})
    assert info.value.key == name
    assert info.value.error_code == ErrorCode.INVALID_CONFIG


def test_unknown_names_are_rejected():
    with pytest.raises(InvalidConfigurationException, match="Unknown topic config name: segment.size"):
        LogConfig.from_props({"segment.size": "1"})


def test_compaction_lags_must_be_ordered():
    with pytest.raises(InvalidConfigurationException, match="min.compaction.lag.ms"):
        LogConfig.from_props({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_kafka_4_timestamp_bounds():
    """Kafka 4.0 removed message.timestamp.difference.max.ms and bounds future timestamps to an hour
    by default (KIP-937)."""
    config = LogConfig()
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (LONG_MAX, 3600000)
    with pytest.raises(InvalidConfigurationException, match="Unknown topic config name"):
        LogConfig.from_props({"message.timestamp.difference.max.ms": "500"})


def test_compacted_topics_roll_by_max_compaction_lag():
    assert LogConfig(cleanup_policy=("compact",), max_compaction_lag_ms=100, segment_ms=1000).max_segment_ms == 100
    assert LogConfig(max_compaction_lag_ms=100, segment_ms=1000).max_segment_ms == 1000


def test_jitter_stays_below_segment_ms():
    config = LogConfig(segment_ms=10, segment_jitter_ms=1000)
    assert all(0 <= config.random_segment_jitter() < 10 for _ in range(100))
    assert LogConfig().random_segment_jitter() == 0
