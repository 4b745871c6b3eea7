"""server/zookeeper/replica_assignment.py against Kafka 3.9.2's own AdminUtils.assignReplicasToBrokers: each line
of replica_assignment_kafka39.txt is what Kafka answered for brokers 0..n-1 (their racks, '-' for
none), 10 partitions, a replication factor, a fixed start index and a start partition id; written by
a small Java program calling org.apache.kafka.admin.AdminUtils from kafka-server-common-3.9.2.jar."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from samsa.server.zookeeper.replica_assignment import (
    AdminOperationError, InvalidReplicationFactor, assign_replicas_to_brokers, rack_alternated_brokers,
)

VECTORS = Path(__file__).with_name("replica_assignment_kafka39.txt")


def kafka_answers():
    for line in VECTORS.read_text().splitlines():
        racks, partitions, rf, fixed, start, assignment = line.split(" ", 5)
        brokers = [(i, None if r == "-" else r) for i, r in enumerate(racks.split(","))]
        expected = {int(p): [int(b) for b in replicas.split(", ")]
                    for p, replicas in re.findall(r"(\d+)=\[([\d, ]+)\]", assignment)}
        yield pytest.param(brokers, int(partitions), int(rf), int(fixed), int(start), expected, id=line[:40])


@pytest.mark.parametrize("brokers, partitions, rf, fixed, start, expected", list(kafka_answers()))
def test_kafkas_assignments(brokers, partitions, rf, fixed, start, expected):
    assert assign_replicas_to_brokers(brokers, partitions, rf, fixed, start) == expected


def test_random_start_stays_within_the_rules():
    brokers = [(b, f"r{b % 3}") for b in range(6)]
    for replicas in assign_replicas_to_brokers(brokers, 30, 3).values():
        assert len(set(replicas)) == 3 and len({b % 3 for b in replicas}) == 3


def test_refusals_and_rack_interleaving():
    with pytest.raises(InvalidReplicationFactor, match="larger than available brokers: 2"):
        assign_replicas_to_brokers([(0, None), (1, None)], 1, 3)
    with pytest.raises(AdminOperationError, match="Not all brokers have rack information"):
        assign_replicas_to_brokers([(0, "a"), (1, None)], 1, 1)
    assert rack_alternated_brokers({0: "b", 1: "a", 2: "a", 3: "c", 4: "b"}) == [1, 0, 3, 2, 4]
