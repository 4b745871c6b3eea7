"""The share coordinator's RPCs (InitializeShareGroupState, ReadShareGroupState,
WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary) and FindCoordinator's
SHARE keys, the same requests sent to Samsa and to Apache Kafka 4.4: the answers compared field by
field (test_differential.py's normalization), errors and their messages included.

Both brokers run with `__share_group_state` at one replica (a single node).
The topic ids differ between the two brokers: each request names the topic's id on its broker.
"""

from __future__ import annotations

import uuid

import pytest
from compat_util import wait_for
from conftest import BrokerPool, broker_kinds
from kafka_oracle import OracleUnavailable
from server_process import HOST
from test_differential import assert_same, create_topics_request, metadata_request
from wire_client import WireClient

from samsa.coordinator.share_coordinator import SharePartitionKey, coordinator_key
from samsa.coordinator.share_state import PersisterStateBatch, SharePartitionState
from samsa.server.share.persister import (
    delete_request,
    initialize_request,
    read_request,
    summary_request,
    write_request,
)
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
Write = request_class(ApiKey.WRITE_SHARE_GROUP_STATE)

SHARE = 2
SINGLE_NODE_STATE_TOPIC = {"share.coordinator.state.topic.replication.factor": 1,
                           "share.coordinator.state.topic.min.isr": 1}
RETRIABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)
# One random topic id both brokers lack.
UNKNOWN_TOPIC = uuid.UUID("3f9a4c1e-5b6d-4e7f-8a9b-0c1d2e3f4a5b")


class Broker:
    def __init__(self, server) -> None:
        self.client = WireClient(HOST, server.port)
        self.topic_ids: dict[str, uuid.UUID] = {}

    def call(self, build, version: int):
        """`build(topic id of "t")` sent at `version`."""
        return self.client.call(build(self.topic_ids["t"]), version)


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    if {"samsa", "kafka"} - set(broker_kinds()):
        pytest.skip("differential checks need both brokers (SAMSA_COMPAT_BROKERS)")
    pools = [BrokerPool(tmp_path_factory, kind, kind) for kind in ("samsa", "kafka")]
    try:
        try:
            samsa = pools[0](overrides=SINGLE_NODE_STATE_TOPIC)
            kafka = pools[1](overrides=SINGLE_NODE_STATE_TOPIC)
        except OracleUnavailable as e:
            pytest.skip(str(e))
        pair = Broker(samsa), Broker(kafka)
        for broker in pair:
            _prepare(broker)
        yield pair
    finally:
        for pool in pools:
            pool.close()


def _prepare(broker: Broker) -> None:
    """Topic "t" with two partitions, and the share coordinator ready for its share partitions."""
    assert broker.client.call(create_topics_request("t", 2), 7).topics[0].error_code == 0
    metadata = wait_for(lambda: _topic(broker.client.call(metadata_request("t"), 12)), what="topic t")
    broker.topic_ids["t"] = metadata.topic_id
    # Kafka creates __share_group_state on the first FindCoordinator and answers
    # COORDINATOR_NOT_AVAILABLE meanwhile; Samsa creates it and answers at once.
    find = FindCoordinator(key_type=SHARE, coordinator_keys=[coordinator_key(SharePartitionKey("g", metadata.topic_id,
                                                                                               0))])
    wait_for(lambda: broker.client.call(find, 6).coordinators[0].error_code == ErrorCode.NONE, timeout=30,
             what="the share coordinator")
    # Its partitions load in the background: the first initialize retried as the persister would.
    wait_for(lambda: _result(broker.call(lambda t: initialize(t, 1, group="warm-up"), 0)).error_code
             not in RETRIABLE, timeout=30, what="the share coordinator's partitions loaded")


def _topic(response):
    topic = response.topics[0]
    return topic if topic.error_code == 0 else None


def _result(response):
    return response.results[0].partitions[0]


def initialize(topic_id, partition, state_epoch=0, start_offset=0, group="g"):
    return initialize_request(group, topic_id, partition, state_epoch, start_offset)


def read(topic_id, partition, leader_epoch=0, group="g"):
    return read_request(group, topic_id, partition, leader_epoch)


def write(topic_id, partition, batches=(), start_offset=0, leader_epoch=0, state_epoch=0, delivery_complete_count=-1,
          group="g"):
    """`batches`: (first offset, last offset, delivery state, delivery count)."""
    return write_request(group, topic_id, partition, SharePartitionState(
        state_epoch=state_epoch, start_offset=start_offset, leader_epoch=leader_epoch,
        delivery_complete_count=delivery_complete_count, state_batches=[PersisterStateBatch(*b) for b in batches]))


def summary(topic_id, partition, group="g"):
    return summary_request(group, topic_id, partition, 0)


def delete(topic_id, partitions, group="g"):
    return delete_request(group, topic_id, partitions)


# The sequence both brokers get, in order: (what, request builder, version). Each answer is compared.
SEQUENCE = [
    ("write before initialize", lambda t: write(t, 0), 1),
    ("read before initialize", lambda t: read(t, 0), 0),
    ("summary before initialize", lambda t: summary(t, 0), 1),
    ("delete before initialize", lambda t: delete(t, [0]), 0),
    ("initialize", lambda t: initialize(t, 0, state_epoch=1, start_offset=5), 0),
    ("initialize at an older state epoch", lambda t: initialize(t, 0, state_epoch=0), 0),
    ("read at a new leader epoch", lambda t: read(t, 0, leader_epoch=3), 0),
    ("read at an older leader epoch", lambda t: read(t, 0, leader_epoch=2), 0),
    ("write", lambda t: write(t, 0, [(5, 9, 2, 1), (10, 14, 0, 2), (12, 13, 4, 5)], start_offset=5, leader_epoch=3,
                               state_epoch=1, delivery_complete_count=10), 1),
    ("write at an older leader epoch", lambda t: write(t, 0, leader_epoch=2, state_epoch=1), 1),
    ("write at an older state epoch", lambda t: write(t, 0, leader_epoch=3, state_epoch=0), 1),
    ("write v0 moving the start offset", lambda t: write(t, 0, [(8, 20, 0, 3)], start_offset=8, leader_epoch=3,
                                                         state_epoch=1), 0),
    ("write moving the start offset back", lambda t: write(t, 0, [], start_offset=2, leader_epoch=4, state_epoch=1), 1),
    ("read the combined batches", lambda t: read(t, 0, leader_epoch=3), 0),
    ("summary v1", lambda t: summary(t, 0), 1),
    ("summary v0", lambda t: summary(t, 0), 0),
    ("negative partition", lambda t: write(t, -1), 1),
    ("negative leader epoch", lambda t: read(t, 0, leader_epoch=-1), 0),
    ("negative state epoch", lambda t: initialize(t, 0, state_epoch=-1), 0),
    ("a partition the topic lacks", lambda t: initialize(t, 5), 0),
    ("a topic the broker lacks", lambda t: initialize(UNKNOWN_TOPIC, 0), 0),
    ("an empty group id", lambda t: read(t, 0, group=""), 0),
    ("no topics", lambda t: Write(group_id="g", topics=[]), 1),
    ("initialize without an offset", lambda t: initialize(t, 1, state_epoch=0, start_offset=-1), 0),
    ("summary without an offset", lambda t: summary(t, 1), 1),
    ("delete both", lambda t: delete(t, [1, 0]), 0),
    ("read after delete", lambda t: read(t, 0, leader_epoch=3), 0),
    ("initialize again after delete", lambda t: initialize(t, 0, state_epoch=0, start_offset=0), 0),
]


@pytest.mark.parametrize("what, build, version", SEQUENCE, ids=[what for what, _, _ in SEQUENCE])
def test_share_state_rpcs_answer_as_kafkas(brokers, what, build, version):
    samsa, kafka = brokers
    assert_same(samsa.call(build, version), kafka.call(build, version))


def test_find_coordinator_share_keys_answer_as_kafkas(brokers):
    samsa, kafka = brokers
    for key_builder, version in ((lambda t: ["bad-key", f"g:{t}:0", "g:AAECAwQFBgcICQoLDA0ODw:x"], 6),
                                 (lambda t: [coordinator_key(SharePartitionKey("g", t, 0))], 5)):
        answers = [broker.client.call(FindCoordinator(key_type=SHARE, coordinator_keys=key_builder(
            broker.topic_ids["t"])), version) for broker in brokers]
        # Keys name each broker's topic id; nodes and hosts are the brokers' own.
        for answer in answers:
            for c in answer.coordinators:
                c.key, c.node_id, c.host = "", 0, ""
        assert_same(*answers)
