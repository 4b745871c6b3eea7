import pytest

from samsa.storage.checkpoints import (
    LeaderEpochCheckpointFile, OffsetCheckpointFile, new_directory_id, read_properties, write_properties,
)


def test_offset_checkpoint_is_written_in_kafkas_format(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(path).write({("orders", 0): 42, ("my-topic", 11): 0})
    assert path.read_text() == "0\n2\norders 0 42\nmy-topic 11 0\n"
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_offset_checkpoint_round_trip(tmp_path):
    checkpoint = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    offsets = {(f"topic.{i}", i % 3): i * 1000 for i in range(50)}
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets
    checkpoint.write({})
    assert checkpoint.read() == {}
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n0\n"


def test_a_missing_checkpoint_reads_empty(tmp_path):
    assert OffsetCheckpointFile(tmp_path / "nothing").read() == {}


def test_an_empty_checkpoint_reads_empty(tmp_path):
    """Kafka's LogCleanerManager creates cleaner-offset-checkpoint empty; its reader reads no entry."""
    (tmp_path / "cleaner-offset-checkpoint").write_text("")
    assert OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint").read() == {}


@pytest.mark.parametrize("text", [
    "1\n0\n",  # unknown version
    "0\n2\nt 0 5\n",  # fewer entries than announced
    "0\n1\nt 0\n",  # a short line
    "0\n1\nt x 5\n",  # not a partition number
    "0\n",
])
def test_a_malformed_checkpoint_is_an_error(tmp_path, text):
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(ValueError):
        OffsetCheckpointFile(path).read()


def test_leader_epoch_checkpoint(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(path).write([(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert LeaderEpochCheckpointFile(path).read() == [(0, 0), (3, 120)]


def test_meta_properties_round_trip(tmp_path):
    path = tmp_path / "meta.properties"
    props = {"version": "1", "node.id": "3", "cluster.id": "4L6g3nShT-eMCtK--X86sw", "directory.id": new_directory_id()}
    write_properties(path, props)
    lines = path.read_text().splitlines()
    assert lines[0] == "#" and lines[1].startswith("#")
    assert "cluster.id=4L6g3nShT-eMCtK--X86sw" in lines
    assert read_properties(path) == props
    assert len(props["directory.id"]) == 22


def test_java_properties_syntax(tmp_path):
    path = tmp_path / "meta.properties"
    path.write_text("# comment\n! other comment\n\nbroker.id = 5\ncluster.id:abc\nkey\\=x=a\\:b\n")
    assert read_properties(path) == {"broker.id": "5", "cluster.id": "abc", "key=x": "a:b"}
    assert read_properties(tmp_path / "missing") is None
