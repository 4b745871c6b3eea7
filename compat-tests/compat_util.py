"""Helpers shared by the compatibility tests (imported as a plain module; conftest puts this
directory on sys.path)."""

from __future__ import annotations

import json
import random
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from samsa.wire import records

HERE = Path(__file__).resolve().parent
NODE_DIR = HERE / "node"

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def wait_for(pred, timeout: float = 10.0, interval: float = 0.05, what: str = "condition"):
    """Poll pred() until it returns something truthy; fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = pred()
        except Exception as e:  # keep polling, but show the last problem on timeout
            last = e
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None  # ms, CreateTime
    partition: int = 0


def make_records(n: int = 24, partitions: int = 1, seed: int = 0, null_header_values: bool = True,
                 headers: bool = True, base_ts: int | None = None,
                 allow_null_key_and_value: bool = True) -> list[Rec]:
    """A data set that exercises what a broker must carry unchanged: null and empty keys, null
    (tombstone) and empty values, compressible and incompressible values, repeated and null
    header values, explicit CreateTime timestamps. Records go to partition i % partitions."""
    rnd = random.Random(seed)
    if base_ts is None:
        base_ts = (int(time.time()) - 3600) * 1000
    out = []
    for i in range(n):
        if i % 6 == 1:
            key = None
        elif i % 6 == 2:
            key = b""
        else:
            key = f"key-{i}".encode()
        if i % 7 == 3:
            value = None
        elif i % 7 == 5:
            value = b""
        elif i % 7 == 6:
            value = rnd.randbytes(300)  # incompressible, every byte value
        else:
            value = (f"value-{i}-" + "the quick brown fox jumps over the lazy dog " * (1 + i % 20)).encode()
        if key is None and value is None and not allow_null_key_and_value:
            key = b"k"
        hdrs: list[tuple[str, bytes | None]] = []
        if headers and i % 3 != 0:
            hdrs = [("h", f"hv-{i}".encode()), ("dup", b"1"), ("dup", b"2"), ("empty", b"")]
            if null_header_values and i % 2 == 0:
                hdrs.append(("null", None))
        out.append(Rec(key, value, hdrs, base_ts + i * 1000 + (i % 4) * 7, i % partitions))
    return out


def by_partition(recs: list[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in recs:
        out.setdefault(r.partition, []).append(r)
    return out


def confluent_admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def create_acls(admin, bindings: list, timeout: float = 15.0) -> None:
    """Create ACLs with confluent-kafka's admin client and wait until the broker lists them. Kafka
    answers CreateAcls once its controller has committed them; the broker's authorizer applies them
    when it reads them back from the metadata log, a moment later (Samsa applies them at once). The
    broker lists ACLs from that same authorizer: once they are listed, they are in force."""
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    for future in admin.create_acls(list(bindings), request_timeout=timeout).values():
        assert future.result(timeout) is None
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    wait_for(lambda: all(b in admin.describe_acls(everything, request_timeout=timeout).result(timeout)
                         for b in bindings), timeout, interval=0.1, what=f"ACLs {bindings} in force")


def delete_acls(admin, acl_filter, timeout: float = 15.0) -> list:
    """Delete the ACLs a filter matches and wait until the broker no longer lists them (Kafka's
    authorizer drops them a moment after the controller's answer, as create_acls says); returns the
    bindings deleted."""
    deleted = admin.delete_acls([acl_filter], request_timeout=timeout)[acl_filter].result(timeout)
    wait_for(lambda: not admin.describe_acls(acl_filter, request_timeout=timeout).result(timeout), timeout,
             interval=0.1, what=f"ACLs matching {acl_filter} gone")
    return deleted


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None,
                 timeout: float = 15.0) -> None:
    """Create a topic with confluent-kafka's admin client and wait until metadata shows it."""
    from confluent_kafka.admin import NewTopic

    admin = confluent_admin(bootstrap)
    fut = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                              operation_timeout=timeout, request_timeout=timeout)[name]
    fut.result(timeout)
    wait_for(lambda: _has_partitions(admin, name, partitions), timeout, what=f"topic {name} in metadata")


def _has_partitions(admin, name: str, partitions: int) -> bool:
    md = admin.list_topics(topic=name, timeout=5)
    t = md.topics.get(name)
    return t is not None and t.error is None and len(t.partitions) == partitions


def confluent_consume_all(bootstrap: str, topic: str, partitions: dict[int, int], timeout: float = 20.0,
                          start: int = 0, extra: dict | None = None):
    """Read partitions {partition: count} from offset `start` with assign(); returns
    {partition: [Message]} with exactly `count` messages per partition (fails otherwise)."""
    from confluent_kafka import Consumer, TopicPartition

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "compat-unused",  # required by the client; no group API is used with assign()
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "error",
        "fetch.wait.max.ms": 100,
    }
    conf.update(extra or {})
    c = Consumer(conf)
    try:
        c.assign([TopicPartition(topic, p, start) for p in partitions])
        got: dict[int, list] = {p: [] for p in partitions}
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < n for p, n in partitions.items()):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"consumed { {p: len(v) for p, v in got.items()} } of {partitions} from {topic} in {timeout}s")
            for m in c.consume(500, 0.5):
                if m.error():
                    raise AssertionError(f"consume error: {m.error()}")
                got[m.partition()].append(m)
        extra_msgs = c.consume(100, 0.3)  # nothing beyond what was produced
        assert not [m for m in extra_msgs if not m.error()], "more messages than produced"
        return got
    finally:
        c.close()


def node_script(script: str, payload: dict, timeout: float = 60.0) -> dict:
    """Run compat-tests/node/<script> with a JSON payload on stdin; returns its JSON result."""
    proc = subprocess.run(["node", str(NODE_DIR / script)], input=json.dumps(payload).encode(),
                          capture_output=True, timeout=timeout, cwd=str(NODE_DIR))
    out = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        raise AssertionError(f"node {script} exited {proc.returncode}\nstdout:\n{out}\n"
                             f"stderr:\n{proc.stderr.decode(errors='replace')[-4000:]}")
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise AssertionError(f"node {script} printed no JSON result:\n{out}\n{proc.stderr.decode()[-4000:]}") from None


def log_batches(data_dir: Path, partition_dir: str):
    """(header, records) of every batch in a partition's segments, in offset order."""
    for segment in sorted((data_dir / partition_dir).glob("*.log")):
        buf = segment.read_bytes()
        for pos, header in records.iter_batch_headers(buf):
            if header.magic != 2 or header.batch_length <= 0:
                break  # a preallocated tail
            yield records.decode_batch(buf, pos)
