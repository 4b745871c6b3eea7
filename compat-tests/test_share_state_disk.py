"""`__share_group_state` in one disk format with Apache Kafka: the same share state written through
the share coordinator's RPCs by `samsa serve` and by Kafka 4.4 (`[samsa]`, `[kafka]`), the broker
stopped with SIGTERM; Kafka's DumpLogSegments (`--share-group-state-decoder`) decodes the records
either wrote, and `samsa serve` started on (a copy of) the log dir reads the state back: on its own
dir a restart, on Kafka's the issue's "Samsa starts on a log dir Kafka 4.x wrote"."""

from __future__ import annotations

import json
import re
import shutil
import uuid

import pytest
from compat_util import wait_for
from conftest import BrokerPool
from server_process import HOST
from test_differential import create_topics_request, metadata_request
from test_disk_format import assert_no_trouble, dump_log
from wire_client import WireClient

from samsa.coordinator.share_coordinator import SharePartitionKey, coordinator_key
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
Initialize = request_class(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
Read = request_class(ApiKey.READ_SHARE_GROUP_STATE)
Write = request_class(ApiKey.WRITE_SHARE_GROUP_STATE)

T = 30
TOPIC = "share-disk"
GROUP = "disk-share-group"
SHARE = 2
ACKNOWLEDGED, ARCHIVED = 2, 4
SETTINGS = {"share.coordinator.state.topic.replication.factor": 1, "share.coordinator.state.topic.min.isr": 1,
            "share.coordinator.state.topic.num.partitions": 3,
            "share.coordinator.snapshot.update.records.per.snapshot": 2}
# Three writes after the initialize and a read: with two updates per snapshot the read and the
# first write are updates, the second write a snapshot of all so far, the third an update again.
WRITES = [[(0, 4, ACKNOWLEDGED, 1)], [(5, 9, ARCHIVED, 5)], [(10, 12, ACKNOWLEDGED, 2)]]
STATE = [(0, 4, ACKNOWLEDGED, 1), (5, 9, ARCHIVED, 5), (10, 12, ACKNOWLEDGED, 2)]
RETRIABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)


def call(port: int, request, version: int):
    with WireClient(HOST, port) as client:
        return client.call(request, version)


def result(response):
    return response.results[0].partitions[0]


def served(port: int, request, version: int):
    """The partition's result once the share coordinator has its partition (retried as the persister retries)."""
    return wait_for(lambda: (r := result(call(port, request, version))).error_code not in RETRIABLE and r, T,
                    what="the share coordinator")


def read(topic_id: uuid.UUID):
    return Read(group_id=GROUP, topics=[Read.ReadStateData(topic_id=topic_id, partitions=[
        Read.PartitionData(partition=0, leader_epoch=1)])])


def write_state(port: int) -> uuid.UUID:
    """The share partition (GROUP, TOPIC-0) initialized and written WRITES; the topic's id."""
    assert call(port, create_topics_request(TOPIC, 1), 7).topics[0].error_code == 0
    topic = wait_for(lambda: (t := call(port, metadata_request(TOPIC), 12).topics[0]).error_code == 0 and t, T,
                     what=TOPIC)
    key = coordinator_key(SharePartitionKey(GROUP, topic.topic_id, 0))
    wait_for(lambda: call(port, FindCoordinator(key_type=SHARE, coordinator_keys=[key]), 6).coordinators[0]
             .error_code == ErrorCode.NONE, T, what="__share_group_state")
    initialize = Initialize(group_id=GROUP, topics=[Initialize.InitializeStateData(topic_id=topic.topic_id, partitions=[
        Initialize.PartitionData(partition=0, state_epoch=1, start_offset=0)])])
    assert served(port, initialize, 0).error_code == ErrorCode.NONE
    assert result(call(port, read(topic.topic_id), 0)).error_code == ErrorCode.NONE  # leader epoch 1 recorded
    for batches in WRITES:
        request = Write(group_id=GROUP, topics=[Write.WriteStateData(topic_id=topic.topic_id, partitions=[
            Write.PartitionData(partition=0, state_epoch=1, leader_epoch=1, start_offset=0, delivery_complete_count=8,
                                state_batches=[Write.StateBatch(first_offset=f, last_offset=last, delivery_state=s,
                                                                delivery_count=c) for f, last, s, c in batches])])])
        assert result(call(port, request, 1)).error_code == ErrorCode.NONE
    return topic.topic_id


@pytest.fixture(scope="module")
def written(tmp_path_factory, broker_kind):
    """(log dir, topic id) of the share state a broker of this module's kind wrote, then stopped (SIGTERM)."""
    pool = BrokerPool(tmp_path_factory, f"share-disk-{broker_kind}", broker_kind)
    try:
        b = pool(overrides=SETTINGS)
        topic_id = write_state(b.port)
        rc = b.stop(30)
        assert rc in (0, 143) and not b.sigterm_timed_out, f"{b.kind} exit code {rc} after SIGTERM"
        yield b.data_dir, topic_id
    finally:
        pool.close()


def test_dump_share_group_state(written):
    data_dir, topic_id = written
    logs = sorted(p for p in data_dir.glob("__share_group_state-*/*.log") if p.stat().st_size > 0)
    assert len(logs) == 1, logs  # one share partition: one partition of the topic written
    out = dump_log(*logs, options=("--share-group-state-decoder",))
    assert_no_trouble(out)
    rows = [(json.loads(k), json.loads(v)) for k, v in re.findall(r"^\| offset: \d+ .* key: (\{.*?\}) payload: (\{.*\})$",
                                                                   out, re.M)]
    kafka_id = coordinator_key(SharePartitionKey("", topic_id, 0)).split(":")[1]
    assert {(k["data"]["groupId"], k["data"]["topicId"], k["data"]["partition"]) for k, _ in rows} == {
        (GROUP, kafka_id, 0)}
    assert [k["type"] for k, _ in rows] == ["0", "1", "1", "0", "1"]  # 0: ShareSnapshot, 1: ShareUpdate
    snapshot, update = rows[3][1]["data"], rows[4][1]["data"]
    assert (snapshot["snapshotEpoch"], snapshot["stateEpoch"], snapshot["leaderEpoch"], snapshot["startOffset"],
            snapshot["deliveryCompleteCount"]) == (1, 1, 1, 0, 8)
    assert [(b["firstOffset"], b["lastOffset"], b["deliveryState"], b["deliveryCount"])
            for b in snapshot["stateBatches"]] == STATE[:2]
    assert (update["snapshotEpoch"], update["leaderEpoch"]) == (1, 1)
    assert [(b["firstOffset"], b["lastOffset"], b["deliveryState"], b["deliveryCount"])
            for b in update["stateBatches"]] == STATE[2:]


def test_samsa_reads_the_state_back_from_the_log_dir(written, tmp_path_factory):
    data_dir, topic_id = written
    copy = tmp_path_factory.mktemp("share-disk-copy") / "logs"
    shutil.copytree(data_dir, copy, ignore=shutil.ignore_patterns(".lock"))
    pool = BrokerPool(tmp_path_factory, "share-disk-serve", "samsa")
    try:
        s = pool(overrides={**SETTINGS, "log.dirs": str(copy)})
        answer = served(s.port, read(topic_id), 0)
        assert (answer.error_code, answer.state_epoch, answer.start_offset) == (ErrorCode.NONE, 1, 0)
        assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in answer.state_batches] == STATE
    finally:
        pool.close()
