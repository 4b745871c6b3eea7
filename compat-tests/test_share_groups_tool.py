"""Kafka's kafka-share-groups.sh (ShareGroupCommand, as bin/kafka-share-groups.sh runs it) against
Samsa and Kafka 4.4 at once, as test_kafka_tools.py runs Kafka's other tools: the normalized
transcripts of one scenario (a share group with a member, then empty: list, describe offsets, state
and members, reset-offsets as a dry run and executed, delete-offsets, delete; kafka-configs on the
group) must be equal; Kafka's transcript is also checked for the lines the scenario is about. A
module of its own: its two brokers are not test_share_groups.py's.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import BrokerPool, broker_kinds
from test_kafka_tools import Tools, assert_same, log4j2, normalize  # noqa: F401 (log4j2: a fixture)
from test_share_groups import BROKER, poll_until, share_consumer
from wire_client import leader_epochs

# A share member's id (a Uuid the client made: Java in url-safe base64, librdkafka in base64) in
# --describe --members, before the client's host.
MEMBER_ID = re.compile(r"(?<= )[A-Za-z0-9_+/-]{22}(?= /<host>)")
# A row of --describe --offsets --verbose: group, topic, partition, then the share-partition state's
# leader epoch (without --verbose, the start offset).
OFFSETS_ROW = re.compile(r"^(tools-share-group tools-share (\d+) )(\d+)(?= )", re.MULTILINE)


def mask_leader_epochs(transcript: str, current: dict[int, int], kind: str) -> str:
    """The state's leader epoch as <leader-epoch> once checked: it is the partition's leader epoch
    when the share partition was last initialized. Samsa's must be the current one. Kafka's may be
    lower than its current one (a leader change after the state was written). CI once saw Kafka 2 and
    Samsa 0, which leader changes on Kafka explain (a combined node starved of CPU can miss heartbeats
    and fence its own broker, which bumps every leader epoch twice); that run's Kafka log was not kept."""
    def mask(m: re.Match) -> str:
        partition, epoch = int(m[2]), int(m[3])
        ok = epoch == current[partition] if kind == "samsa" else 0 <= epoch <= current[partition]
        assert ok, f"{kind}: state leader epoch {epoch}, partition {partition}'s is {current[partition]}"
        return m[1] + "<leader-epoch>"
    return OFFSETS_ROW.sub(mask, transcript)


def keyed_producer(topic: str) -> list[str]:
    """kafka-console-producer with one key for every record, so that they land in the same partition
    on both brokers (without a key, the sticky partitioner picks one at random)."""
    return ["kafka-console-producer", "--topic", topic, "--reader-property", "parse.key=true"]


def share_groups_scenario(t: Tools) -> None:
    topic, group = "tools-share", "tools-share-group"
    g = ["--group", group]
    t.run("kafka-topics", "--create", "--topic", topic, "--partitions", "2", record=False)
    t.run(*keyed_producer(topic), stdin="".join(f"k\tv-{i}\n" for i in range(10)), record=False)
    t.run("kafka-configs", "--alter", "--entity-type", "groups", "--entity-name", group,
          "--add-config", "share.auto.offset.reset=earliest")
    t.run("kafka-configs", "--describe", "--entity-type", "groups", "--entity-name", group)
    c = share_consumer(t.bootstrap, group, topic)
    try:
        poll_until(c, lambda seen: len(seen) >= 10)
        c.commit_sync()
        t.run("kafka-share-groups", "--list")
        t.run("kafka-share-groups", "--list", "--state", "Stable")
        t.run("kafka-share-groups", "--describe", *g)
        t.run("kafka-share-groups", "--describe", *g, "--state")
        t.run("kafka-share-groups", "--describe", *g, "--state", "--verbose")
        t.run("kafka-share-groups", "--describe", *g, "--members")
        t.run("kafka-share-groups", "--describe", *g, "--members", "--verbose")
        # An active group refuses an offset reset.
        t.run("kafka-share-groups", "--reset-offsets", *g, "--topic", topic, "--to-earliest", "--execute", errors=True)
    finally:
        c.close()
    t.run(*keyed_producer(topic), stdin="".join(f"k\tw-{i}\n" for i in range(6)), record=False)
    t.run("kafka-share-groups", "--describe", *g, "--state")
    t.run("kafka-share-groups", "--describe", *g, "--offsets", "--verbose")
    t.run("kafka-share-groups", "--reset-offsets", *g, "--topic", topic, "--to-earliest", "--dry-run")
    t.run("kafka-share-groups", "--reset-offsets", *g, "--topic", topic, "--to-earliest", "--execute")
    t.run("kafka-share-groups", "--describe", *g, "--offsets")
    t.run("kafka-share-groups", "--reset-offsets", *g, "--all-topics", "--to-latest", "--execute")
    t.run("kafka-share-groups", "--describe", *g, "--offsets")
    t.run("kafka-share-groups", "--delete-offsets", *g, "--topic", topic)
    t.run("kafka-share-groups", "--describe", *g, "--offsets")
    t.run("kafka-share-groups", "--delete", *g)
    t.run("kafka-share-groups", "--list")
    t.run("kafka-share-groups", "--describe", "--group", "no-such-group", errors=True)


@pytest.fixture
def share_pair(tmp_path_factory):
    """Samsa and Kafka (those of SAMSA_COMPAT_BROKERS), each with the module's settings, side by side."""
    kinds = broker_kinds()
    if "kafka" not in kinds:
        pytest.skip("compares Samsa's output with Kafka's: needs kafka in SAMSA_COMPAT_BROKERS")
    pools = [BrokerPool(tmp_path_factory, kind, kind) for kind in kinds]
    try:
        yield {kind: pool(BROKER) for kind, pool in zip(kinds, pools)}
    finally:
        for pool in pools:
            pool.close()


def test_kafka_share_groups_tool(share_pair, tmp_path, log4j2):  # noqa: F811
    def one(kind: str) -> str:
        b = share_pair[kind]
        work = tmp_path / kind
        work.mkdir()
        tools = Tools(b.bootstrap, work, log4j2)
        share_groups_scenario(tools)
        (work / "stderr.txt").write_text("\n".join(tools.stderr))
        epochs = leader_epochs(b.port, "tools-share")
        transcript = [MEMBER_ID.sub("<member-id>", normalize(t, b.bootstrap, b.data_dir)) for t in tools.transcript]
        return "\n".join(mask_leader_epochs(t, epochs, kind) if "--offsets --verbose" in t else t
                         for t in transcript)

    with ThreadPoolExecutor(len(share_pair)) as ex:
        out = dict(zip(share_pair, ex.map(one, share_pair)))
    for kind, transcript in out.items():
        (tmp_path / kind / "transcript.txt").write_text(transcript)
    if "samsa" in out:
        assert_same(out, tmp_path)
    # Kafka's transcript is what the scenario is about (with Samsa, it is also what Samsa's equals).
    kafka = out["kafka"]
    for expected in ["$ kafka-share-groups --list\ntools-share-group\n[exit 0]",
                     "tools-share-group <member-id> /<host> rdkafka 2 tools-share:0,1",
                     "stderr: Share group 'tools-share-group' is not empty.\n[exit 1]",
                     "Deletion of requested share groups ('tools-share-group') was successful."]:
        assert expected in kafka, kafka
