"""Holds a librdkafka mock cluster (C, in memory) open as a standalone broker for other clients.

`python bench/mock_cluster.py` prints the bootstrap address, then reads commands from stdin:
`create TOPIC PARTITIONS` (the mock serves no CreateTopics) answers `ok` or `error N`. EOF ends it.
The library is the librdkafka that confluent-kafka's wheel bundles (confluent_kafka.libs/).
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys

import confluent_kafka

RD_KAFKA_PRODUCER = 0


def load_librdkafka() -> ctypes.CDLL:
    package = os.path.dirname(confluent_kafka.__file__)
    candidates = sorted(glob.glob(os.path.join(package, "..", "confluent_kafka.libs", "librdkafka*.so*"))
                        + glob.glob(os.path.join(package, ".libs", "librdkafka*.so*")))
    if not candidates:
        raise SystemExit("librdkafka not found inside the confluent-kafka wheel")
    lib = ctypes.CDLL(candidates[0])
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    return lib


def main() -> None:
    lib = load_librdkafka()
    errstr = ctypes.create_string_buffer(512)
    handle = lib.rd_kafka_new(RD_KAFKA_PRODUCER, lib.rd_kafka_conf_new(), errstr, len(errstr))
    if not handle:
        raise SystemExit(f"rd_kafka_new: {errstr.value.decode()}")
    cluster = lib.rd_kafka_mock_cluster_new(handle, 1)
    print(lib.rd_kafka_mock_cluster_bootstraps(cluster).decode(), flush=True)
    for line in sys.stdin:
        command = line.split()
        if command[:1] == ["create"]:
            error = lib.rd_kafka_mock_topic_create(cluster, command[1].encode(), int(command[2]), 1)
            print("ok" if error == 0 else f"error {error}", flush=True)
    os._exit(0)  # the mock's threads would otherwise keep the process alive


if __name__ == "__main__":
    main()
