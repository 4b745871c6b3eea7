"""Producer id blocks from /latest_producer_id_block (server/zookeeper/zk_client.py, Kafka's
ZkProducerIdManager.getNewProducerIdBlock), which the controller hands Kafka brokers and a Samsa
broker takes for itself, against a ZooKeeper stand-in: the first block starts at
0 (the znode empty), each next one after the latest, and a write another broker beat is read again."""

from __future__ import annotations

from types import SimpleNamespace

from kazoo.exceptions import BadVersionError, NoNodeError

from samsa.server.zookeeper.zk_client import new_producer_id_block
from samsa.wire import zk_data


class BlockZnode:
    """/latest_producer_id_block: get, and set at a version; `racing` writes land first."""

    def __init__(self, data: bytes | None, racing: list[bytes] = ()) -> None:
        self.data, self.version, self.racing = data, 0, list(racing)

    def get(self, path):
        assert path == zk_data.LATEST_PRODUCER_ID_BLOCK
        if self.data is None:
            raise NoNodeError()
        return self.data, SimpleNamespace(version=self.version)

    def create(self, path, data):
        self.data, self.version = data, 0

    def set(self, path, data, version):
        if self.racing:
            self.data, self.version = self.racing.pop(0), self.version + 1
        if version != self.version:
            raise BadVersionError()
        self.data, self.version = data, self.version + 1


def test_blocks_follow_the_latest_one():
    znode = BlockZnode(b"")  # created empty at startup, as Kafka's persistent paths
    assert new_producer_id_block(znode, 1) == zk_data.ProducerIdBlock(1, 0, 1000)
    assert new_producer_id_block(znode, 0) == zk_data.ProducerIdBlock(0, 1000, 1000)
    assert zk_data.decode_producer_id_block(znode.data) == zk_data.ProducerIdBlock(0, 1000, 1000)
    assert new_producer_id_block(BlockZnode(None), 2) == zk_data.ProducerIdBlock(2, 0, 1000)


def test_a_block_another_broker_took_meanwhile_is_skipped():
    theirs = zk_data.encode_producer_id_block(zk_data.ProducerIdBlock(7, 1000, 1000))
    znode = BlockZnode(zk_data.encode_producer_id_block(zk_data.ProducerIdBlock(7, 0, 1000)), racing=[theirs])
    assert new_producer_id_block(znode, 1) == zk_data.ProducerIdBlock(1, 2000, 1000)
