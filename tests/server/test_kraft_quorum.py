"""server/kraft/quorum.py's handling of what a Raft Fetch brings: only batches below the high
watermark are replayed (committed), a diverging epoch drops what was kept aside past it. Driven
with the metadata log recorded from Kafka 4.4 (tests/storage/data/kraft_broker_metadata)."""

from __future__ import annotations

import uuid
from pathlib import Path

from samsa.server.config.kafka_config import KafkaConfig
from samsa.server.kraft.quorum import QuorumObserver
from samsa.wire.records import iter_batch_headers

RECORDED = Path(__file__).parents[1] / "storage" / "data" / "kraft_broker_metadata" / "00000000000000000000.log"


def observer(tmp_path, commits: list[int]) -> QuorumObserver:
    config = KafkaConfig({"process.roles": "broker", "node.id": "2", "controller.listener.names": "CONTROLLER",
                          "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
                          "listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": str(tmp_path)})
    return QuorumObserver(config, "cluster", 2, uuid.uuid4(), lambda replay, offset: commits.append(offset))


def test_only_committed_batches_are_replayed(tmp_path):
    data = RECORDED.read_bytes()
    headers = [h for _, h in iter_batch_headers(data)]
    commits: list[int] = []
    quorum = observer(tmp_path, commits)
    quorum._append(memoryview(data))
    assert quorum.fetch_offset == headers[-1].next_offset and quorum.last_fetched_epoch == 1
    middle = headers[len(headers) // 2]
    quorum._commit(middle.next_offset)  # the high watermark at a batch's end
    assert commits == [middle.next_offset - 1] and quorum.applied_offset == middle.next_offset - 1
    assert quorum.replay.image.end_offset <= middle.next_offset  # nothing past the high watermark replayed
    quorum._commit(middle.next_offset)  # nothing new: no publication
    assert len(commits) == 1
    quorum._commit(headers[-1].next_offset)
    assert commits[-1] == headers[-1].next_offset - 1
    assert quorum.replay.image.brokers[2].epoch == 50 and "t1" in quorum.replay.image.topics


def test_a_diverging_epoch_drops_the_uncommitted_tail(tmp_path):
    data = RECORDED.read_bytes()
    headers = [h for _, h in iter_batch_headers(data)]
    quorum = observer(tmp_path, [])
    quorum._append(memoryview(data))
    quorum._commit(headers[2].next_offset)
    quorum._truncate(headers[5].next_offset, 1)
    assert quorum.fetch_offset == headers[5].next_offset
    # Never below what is committed, whatever the leader says.
    quorum._truncate(0, 1)
    assert quorum.fetch_offset == headers[2].next_offset
