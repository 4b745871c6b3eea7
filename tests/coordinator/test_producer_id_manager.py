"""Producer ids come from durably reserved blocks and are never handed out twice."""

import pytest

from samsa.coordinator.producer_id_manager import ProducerIdManager, ProducerIdsUnavailable
from samsa.wire.errors import ErrorCode
from samsa.server.metadata.image import MetadataImage


def test_ids_come_from_blocks_reserved_one_at_a_time():
    reserved = []

    def allocate(size):
        reserved.append(size)
        return 1000 * (len(reserved) - 1)

    manager = ProducerIdManager(allocate, block_size=3)
    assert reserved == []  # nothing reserved before the first id is asked for
    assert [manager.generate_producer_id() for _ in range(4)] == [0, 1, 2, 1000]
    assert reserved == [3, 3]


def test_the_next_block_survives_a_restart_of_the_metadata_image(tmp_path):
    image = MetadataImage.load(tmp_path, "cluster")
    manager = ProducerIdManager(image.allocate_producer_id_block)
    assert [manager.generate_producer_id() for _ in range(2)] == [0, 1]
    reloaded = MetadataImage.load(tmp_path, "cluster")
    assert reloaded.next_producer_id == 1000
    assert ProducerIdManager(reloaded.allocate_producer_id_block).generate_producer_id() == 1000


def test_no_block_at_hand_takes_no_id_and_the_next_block_is_used_once_it_comes():
    """A KRaft broker's next block may still be on its way from the controller: nothing is handed
    out meanwhile (InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS), and the block is used whole."""
    blocks: list[int] = []

    def allocate(size):
        if not blocks:
            raise ProducerIdsUnavailable("Producer ID block is full. Waiting for next block")
        return blocks.pop(0)

    manager = ProducerIdManager(allocate, block_size=2)
    with pytest.raises(ProducerIdsUnavailable) as refused:
        manager.generate_producer_id()
    assert refused.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    blocks.append(5000)
    assert [manager.generate_producer_id() for _ in range(2)] == [5000, 5001]
    with pytest.raises(ProducerIdsUnavailable):
        manager.generate_producer_id()
