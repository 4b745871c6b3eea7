"""Where a new topic's replicas go in a ZooKeeper cluster: Kafka's AdminUtils.assignReplicasToBrokers
(server-common, org.apache.kafka.admin), which AdminZkClient uses to create topics and add partitions.

Without racks, partition p's first replica is broker (p + start) mod n of the brokers sorted by id,
and the others follow at a shift that grows each time the partitions wrap round the brokers. With a
rack on every broker, the brokers are first interleaved rack by rack (racks sorted, each rack's
brokers sorted), and a further replica skips a rack or broker that already has one while some rack
or broker has none. Some brokers with racks and some without is an error, as in Kafka.
"""

from __future__ import annotations

import random
from collections.abc import Iterable


class InvalidReplicationFactor(ValueError):
    """Kafka's InvalidReplicationFactorException."""


class AdminOperationError(ValueError):
    """Kafka's AdminOperationException."""


def assign_replicas_to_brokers(brokers: Iterable[tuple[int, str | None]], partitions: int, replication_factor: int,
                               fixed_start_index: int = -1, start_partition_id: int = -1,
                               rng: random.Random | None = None) -> dict[int, list[int]]:
    """partition id -> replicas for `partitions` new partitions over `brokers` ((id, rack) pairs).
    A negative fixed_start_index: a random start and shift, as Kafka picks them."""
    brokers = sorted(brokers)
    if partitions <= 0:
        raise ValueError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactor("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactor(f"Replication factor: {replication_factor} larger than available brokers: "
                                       f"{len(brokers)}.")
    rng = rng or random.Random()
    racks = {broker_id: rack for broker_id, rack in brokers if rack is not None}
    if not racks:
        return _assign(sorted(b for b, _ in brokers), None, partitions, replication_factor, fixed_start_index,
                       start_partition_id, rng)
    if len(racks) < len(brokers):
        raise AdminOperationError("Not all brokers have rack information for replica rack aware assignment.")
    return _assign(rack_alternated_brokers(racks), racks, partitions, replication_factor, fixed_start_index,
                   start_partition_id, rng)


def rack_alternated_brokers(racks: dict[int, str]) -> list[int]:
    """The brokers interleaved rack by rack: racks sorted, each rack's brokers in id order."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker_id)
    queues = [iter(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    index = 0
    while len(result) < len(racks):
        taken = next(queues[index], None)
        if taken is not None:
            result.append(taken)
        index = (index + 1) % len(queues)
    return result


def _assign(arranged: list[int], racks: dict[int, str] | None, partitions: int, replication_factor: int,
            fixed_start_index: int, start_partition_id: int, rng: random.Random) -> dict[int, list[int]]:
    n = len(arranged)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    next_replica_shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    num_racks = len(set(racks.values())) if racks else 1
    current = max(0, start_partition_id)
    result: dict[int, list[int]] = {}
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            next_replica_shift += 1
        first = (current + start_index) % n
        replicas = [arranged[first]]
        if racks is None:
            replicas += [arranged[_replica_index(first, next_replica_shift, j, n)] for j in range(replication_factor - 1)]
        else:
            racks_used, k = {racks[arranged[first]]}, 0
            for _ in range(replication_factor - 1):
                while True:
                    broker_id = arranged[_replica_index(first, next_replica_shift * num_racks, k, n)]
                    k += 1
                    rack = racks[broker_id]
                    # Skip a rack that has a replica while another has none, and likewise a broker.
                    if ((rack not in racks_used or len(racks_used) == num_racks)
                            and (broker_id not in replicas or len(replicas) == n)):
                        replicas.append(broker_id)
                        racks_used.add(rack)
                        break
        result[current] = replicas
        current += 1
    return result


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (brokers - 1)
    return (first_replica_index + shift) % brokers
