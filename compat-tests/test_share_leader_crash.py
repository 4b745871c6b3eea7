"""A share-consumed broker killed with kill -9 while a member holds acquired records, and started
again on the same log dir, several times over: no record is delivered more often than
`group.share.delivery.count.limit` allows (2 here), in all, and none is lost (each is accepted once,
or delivered the limit's number of times and archived). The delivery count of a record acquired
when the broker died goes on from there: Samsa writes acquisitions to the share coordinator before
answering them (Kafka 4.4 does not, and may deliver such a record past the limit). Kafka's
DumpLogSegments (`--share-group-state-decoder`) reads the `__share_group_state` those writes left.

One `samsa serve` for the module, a topic
of two partitions written in batches of four records, and a share consumer by hand over the wire
(ShareFetch with its acknowledgements piggybacked, ACCEPT or RELEASE), whose member ids are its own
(Kafka's ShareFetch asks nothing of the group coordinator); the share partitions are initialized at
offset 0 with InitializeShareGroupState as the group coordinator would.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field

import pytest
from compat_util import wait_for
from conftest import BrokerPool
from server_process import HOST
from test_differential import create_topics_request, metadata_request
from test_disk_format import assert_no_trouble, dump_log
from wire_client import WireClient

from samsa.coordinator.share_coordinator import SharePartitionKey, coordinator_key
from samsa.wire import records
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
Initialize = request_class(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
Produce = request_class(ApiKey.PRODUCE)
ShareFetch = request_class(ApiKey.SHARE_FETCH)

T = 30
TOPIC = "share-crash"
GROUP = "crash-share-group"
PARTITIONS = 2
RECORDS = 24  # per partition, in batches of BATCH
BATCH = 4
LIMIT = 2
CRASHES = 3
ACCEPT, RELEASE = 1, 2
SHARE = 2
SETTINGS = {"group.share.delivery.count.limit": LIMIT,
            "share.coordinator.state.topic.num.partitions": 1, "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1}


def call(port: int, request, version: int):
    with WireClient(HOST, port) as client:
        return client.call(request, version)


@dataclass
class Consumption:
    """What the members were answered: each record's deliveries (and the delivery counts they were
    told), and the records whose ACCEPT the broker confirmed."""

    deliveries: Counter = field(default_factory=Counter)  # (partition, offset) -> deliveries
    counts: dict = field(default_factory=dict)  # (partition, offset) -> delivery counts told, in order
    accepted: Counter = field(default_factory=Counter)
    topic_id: uuid.UUID | None = None


class Member:
    """A share consumer over one connection: ShareFetch in its share session, acknowledging what
    the previous fetch gave it in the next one."""

    def __init__(self, port: int, topic_id: uuid.UUID, seen: Consumption) -> None:
        self.client = WireClient(HOST, port)
        self.member_id = str(uuid.uuid4())
        self.topic_id = topic_id
        self.epoch = 0
        self.seen = seen
        self.acks: dict[int, list[tuple[int, int]]] = {}  # partition -> [(offset, type)]
        self.pending_accepts: list[tuple[int, int]] = []

    def fetch(self, max_records: int = 7, max_wait_ms: int = 3000) -> list[tuple[int, int]]:
        """The records acquired, acknowledging those of the last fetch as `acknowledge` said."""
        partitions = range(PARTITIONS) if self.epoch == 0 else sorted(self.acks)
        request = ShareFetch(
            group_id=GROUP, member_id=self.member_id, share_session_epoch=self.epoch, max_wait_ms=max_wait_ms,
            min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=max_records, share_acquire_mode=0,
            is_renew_ack=False, forgotten_topics_data=[],
            topics=[ShareFetch.FetchTopic(topic_id=self.topic_id, partitions=[
                ShareFetch.FetchPartition(partition_index=p, acknowledgement_batches=[
                    ShareFetch.AcknowledgementBatch(first_offset=o, last_offset=o, acknowledge_types=[t])
                    for o, t in sorted(self.acks.get(p, []))])
                for p in partitions])])
        response = self.client.call(request, 2)
        assert response.error_code == ErrorCode.NONE, ErrorCode(response.error_code).name
        self.epoch += 1
        got = []
        for topic in response.responses:
            for partition in topic.partitions:
                assert partition.error_code == ErrorCode.NONE, ErrorCode(partition.error_code).name
                assert partition.acknowledge_error_code == ErrorCode.NONE, partition.acknowledge_error_message
                for a in partition.acquired_records:
                    for offset in range(a.first_offset, a.last_offset + 1):
                        key = (partition.partition_index, offset)
                        got.append(key)
                        self.seen.deliveries[key] += 1
                        self.seen.counts.setdefault(key, []).append(a.delivery_count)
        for key in self.pending_accepts:  # their acknowledgement was answered without an error
            self.seen.accepted[key] += 1
        self.pending_accepts = []
        self.acks = {}
        return got

    def acknowledge(self, keys: list[tuple[int, int]], ack_type: int) -> None:
        """Acknowledge `keys` with the next fetch."""
        for partition, offset in keys:
            self.acks.setdefault(partition, []).append((offset, ack_type))
            if ack_type == ACCEPT:
                self.pending_accepts.append((partition, offset))

    def close(self) -> None:
        self.client.close()


def prepare(port: int) -> uuid.UUID:
    """The topic with its records, and its share partitions initialized at offset 0; its id."""
    assert call(port, create_topics_request(TOPIC, PARTITIONS), 7).topics[0].error_code == 0
    topic = wait_for(lambda: (t := call(port, metadata_request(TOPIC), 12).topics[0]).error_code == 0 and t, T,
                     what=TOPIC)
    for partition in range(PARTITIONS):
        for first in range(0, RECORDS, BATCH):
            batch = records.build_batch([records.Record(i, 0, None, f"{partition}-{first + i}".encode(), [])
                                         for i in range(BATCH)])
            response = call(port, Produce(acks=-1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
                name=TOPIC, partition_data=[Produce.PartitionProduceData(index=partition, records=batch)])]), 9)
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        initialize_share_partition(port, topic.topic_id, partition)
    return topic.topic_id


def initialize_share_partition(port: int, topic_id: uuid.UUID, partition: int) -> None:
    """At offset 0, as the group coordinator initializes a share partition it assigns."""
    key = coordinator_key(SharePartitionKey(GROUP, topic_id, partition))
    wait_for(lambda: call(port, FindCoordinator(key_type=SHARE, coordinator_keys=[key]), 6).coordinators[0]
             .error_code == ErrorCode.NONE, T, what="__share_group_state")
    initialize = Initialize(group_id=GROUP, topics=[Initialize.InitializeStateData(
        topic_id=topic_id, partitions=[Initialize.PartitionData(partition=partition, state_epoch=1, start_offset=0)])])
    wait_for(lambda: call(port, initialize, 0).results[0].partitions[0].error_code == ErrorCode.NONE, T,
             what="the share partition initialized")


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    """The broker's log dir and what the members got: CRASHES rounds of fetching, acknowledging
    some and keeping the last fetch's records when kill -9 comes, then one member draining all."""
    rng = random.Random(28)
    pool = BrokerPool(tmp_path_factory, "share-crash")
    try:
        broker = pool(overrides=SETTINGS)
        seen = Consumption(topic_id=prepare(broker.port))
        for _ in range(CRASHES):
            member = Member(broker.port, seen.topic_id, seen)
            got = member.fetch()
            for _ in range(2):
                member.acknowledge([k for k in got if rng.random() < 0.3], ACCEPT)
                member.acknowledge([k for k in got if rng.random() < 0.2 and k not in member.pending_accepts],
                                   RELEASE)
                got = member.fetch()
            assert got, "nothing acquired to hold when the broker dies"
            broker.kill()  # the member holds `got`, and some of the earlier ones unacknowledged
            member.close()
            broker.start()
        # A member accepts everything it gets until nothing is left.
        member = Member(broker.port, seen.topic_id, seen)
        got = member.fetch(max_records=100)
        for _ in range(50):
            member.acknowledge(got, ACCEPT)
            got = member.fetch(max_records=100, max_wait_ms=500)
            if not got:
                break
        member.close()
        rc = broker.stop(30)
        assert rc in (0, 143) and not broker.sigterm_timed_out, f"exit code {rc} after SIGTERM"
        yield broker.data_dir, seen
    finally:
        pool.close()


def test_no_record_is_delivered_more_often_than_the_limit_allows(crashed):
    _, seen = crashed
    assert max(seen.deliveries.values()) <= LIMIT, {k: n for k, n in seen.deliveries.items() if n > LIMIT}
    # The count a member is told counts every delivery before, whichever broker made it.
    for key, counts in seen.counts.items():
        assert counts == list(range(1, len(counts) + 1)), (key, counts)
    # The crashes mattered: records held when the broker died were delivered again, some up to the limit.
    assert Counter(seen.deliveries.values())[LIMIT] > 0


def test_no_record_is_lost(crashed):
    _, seen = crashed
    every = {(p, o) for p in range(PARTITIONS) for o in range(RECORDS)}
    assert set(seen.deliveries) == every
    assert max(seen.accepted.values()) == 1
    # Accepted once, or delivered the limit's number of times and archived.
    left = sorted(k for k in every if not seen.accepted[k] and seen.deliveries[k] < LIMIT)
    assert not left, f"records neither accepted nor delivered {LIMIT} times: {left}"


def test_kafka_reads_the_share_state_written_with_the_acquisitions(crashed):
    data_dir, seen = crashed
    logs = sorted(p for p in data_dir.glob("__share_group_state-*/*.log") if p.stat().st_size > 0)
    assert logs
    out = dump_log(*logs, options=("--share-group-state-decoder",))
    assert_no_trouble(out)
    payloads = [json.loads(v) for v in re.findall(r"^\| offset: \d+ .* payload: (\{.*\})$", out, re.M)]
    batches = [(b["deliveryState"], b["deliveryCount"]) for p in payloads for b in p["data"].get("stateBatches", [])]
    # The acquisitions' writes: AVAILABLE (0) with the deliveries made, up to the limit.
    assert {(0, 1), (0, 2)} <= set(batches)
    assert all(count <= LIMIT for _, count in batches)
