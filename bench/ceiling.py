"""The ceiling: the least work a Kafka broker written in Python can do for a real client.

`python bench/ceiling.py PORT DATA_DIR [RECEIVE_BUFFER]` serves just enough of the protocol for
librdkafka (ApiVersions, Metadata v1, CreateTopics v0, DeleteTopics v0, Produce v3-8, Fetch v4, and
a FindCoordinator v0 that finds none), with request fields parsed by hand with struct. A produced
batch is not validated (no CRC check, no producer state): its base offset is patched in place and
its bytes appended to the partition's file with one write. A Fetch sends file ranges with
os.sendfile. One blocking thread per connection, the fastest way to move bytes through sockets in
CPython. Why this is the fair ceiling: bench/README.md, "`bench/run.py`: Samsa, its peers and the
ceiling".
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
import time
from bisect import bisect_right

I16, I32, I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
# (api key, min version, max version): non-flexible versions only, so every field is fixed-width.
# FindCoordinator is there for librdkafka: it compresses with lz4 only for a broker that has it
# (its LZ4 feature dates from the group coordinator's Kafka, 0.8.2) and silently sends lz4 batches
# uncompressed to one that does not. The ceiling coordinates no group.
APIS = ((0, 3, 8), (1, 4, 4), (3, 1, 1), (10, 0, 0), (18, 0, 2), (19, 0, 0), (20, 0, 0))
UNSUPPORTED_VERSION, UNKNOWN_TOPIC_OR_PARTITION, TOPIC_ALREADY_EXISTS = 35, 3, 36
COORDINATOR_NOT_AVAILABLE = 15


class Partition:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.bases: list[int] = []  # base offset of each batch
        self.positions: list[int] = []
        self.size = 0
        self.next_offset = 0
        self.lock = threading.Lock()

    def append(self, batch: memoryview) -> int:
        with self.lock:
            base = self.next_offset
            batch[0:8] = I64.pack(base)
            self.next_offset = base + I32.unpack_from(batch, 23)[0] + 1
            os.write(self.fd, batch)
            self.bases.append(base)
            self.positions.append(self.size)
            self.size += len(batch)
            return base

    def range_from(self, offset: int, max_bytes: int) -> tuple[int, int]:
        """(position, size) of whole batches from the one holding `offset`: as many as fit in
        `max_bytes`, at least one. (Kafka may end on a partial batch, which the client fetches
        again; the ceiling never wastes those bytes.)"""
        i = bisect_right(self.bases, offset) - 1
        if offset >= self.next_offset or i < 0:
            return 0, 0
        start = self.positions[i]
        if self.size - start <= max_bytes:
            return start, self.size - start
        last = max(bisect_right(self.positions, start + max_bytes) - 1, i + 1)
        end = self.positions[last] if last < len(self.positions) else self.size
        return start, end - start


class Ceiling:
    partition_class = Partition

    def __init__(self, host: str, port: int, data_dir: str) -> None:
        self.host, self.port, self.data_dir = host, port, data_dir
        self.topics: dict[str, list[Partition]] = {}
        self.appended = threading.Condition()
        self.handlers = {0: self.produce, 1: self.fetch, 3: self.metadata, 10: self.find_coordinator,
                         18: self.api_versions, 19: self.create_topics, 20: self.delete_topics}

    # -- framing
    @staticmethod
    def _read_string(buf, pos: int) -> tuple[str | None, int]:
        (n,) = I16.unpack_from(buf, pos)
        pos += 2
        if n < 0:
            return None, pos
        return bytes(buf[pos:pos + n]).decode(), pos + n

    @staticmethod
    def _string(s: str | None) -> bytes:
        if s is None:
            return I16.pack(-1)
        b = s.encode()
        return I16.pack(len(b)) + b

    def serve_connection(self, sock: socket.socket) -> None:
        size_buf = bytearray(4)
        # Every frame is read into the same memory (nothing keeps a frame once handled): a new
        # 1 MB bytearray per request costs a memset and page faults (issue 16).
        buffer = bytearray()
        try:
            while True:
                if sock.recv_into(size_buf, 4, socket.MSG_WAITALL) < 4:
                    return
                (size,) = I32.unpack(size_buf)
                if size > len(buffer):
                    buffer = bytearray(size)
                view = memoryview(buffer)[:size]
                got = 0
                while got < size:
                    n = sock.recv_into(view[got:], size - got)
                    if n == 0:
                        return
                    got += n
                self.handle(sock, view)
        except (ConnectionError, OSError):
            pass
        finally:
            sock.close()

    def handle(self, sock: socket.socket, frame: memoryview) -> None:
        api_key, version, correlation_id = HEADER.unpack_from(frame, 0)
        _, pos = self._read_string(frame, 8)  # client id
        self.handlers[api_key](sock, frame, pos, version, correlation_id)

    @staticmethod
    def _send(sock: socket.socket, correlation_id: int, body: bytes) -> None:
        sock.sendall(I32.pack(len(body) + 4) + I32.pack(correlation_id) + body)

    # -- apis
    def api_versions(self, sock, frame, pos, version, correlation_id) -> None:
        error = 0 if version <= 2 else UNSUPPORTED_VERSION  # KIP-511: the client retries lower
        body = I16.pack(error) + I32.pack(len(APIS)) + b"".join(struct.pack(">hhh", *a) for a in APIS)
        if version >= 1 and not error:
            body += I32.pack(0)
        self._send(sock, correlation_id, body)

    def find_coordinator(self, sock, frame, pos, version, correlation_id) -> None:
        body = I16.pack(COORDINATOR_NOT_AVAILABLE) + I32.pack(-1) + self._string("") + I32.pack(-1)
        self._send(sock, correlation_id, body)

    def metadata(self, sock, frame, pos, version, correlation_id) -> None:
        (count,) = I32.unpack_from(frame, pos)
        pos += 4
        names = []
        for _ in range(max(count, 0)):
            name, pos = self._read_string(frame, pos)
            names.append(name)
        if count < 0:
            names = list(self.topics)
        body = bytearray(I32.pack(1) + I32.pack(0) + self._string(self.host) + I32.pack(self.port)
                         + self._string(None) + I32.pack(0) + I32.pack(len(names)))
        for name in names:
            partitions = self.topics.get(name)
            body += I16.pack(0 if partitions is not None else UNKNOWN_TOPIC_OR_PARTITION)
            body += self._string(name) + b"\x00" + I32.pack(len(partitions or ()))
            for index in range(len(partitions or ())):
                body += I16.pack(0) + struct.pack(">iiiiii", index, 0, 1, 0, 1, 0)
        self._send(sock, correlation_id, bytes(body))

    def create_topics(self, sock, frame, pos, version, correlation_id) -> None:
        (count,) = I32.unpack_from(frame, pos)
        pos += 4
        results = bytearray(I32.pack(count))
        for _ in range(count):
            name, pos = self._read_string(frame, pos)
            partitions, _replication, assignments = struct.unpack_from(">ihi", frame, pos)
            pos += 10
            for _ in range(max(assignments, 0)):
                (replicas,) = I32.unpack_from(frame, pos + 4)
                pos += 8 + 4 * replicas
            (configs,) = I32.unpack_from(frame, pos)
            pos += 4
            for _ in range(max(configs, 0)):
                _, pos = self._read_string(frame, pos)
                _, pos = self._read_string(frame, pos)
            error = TOPIC_ALREADY_EXISTS if name in self.topics else 0
            if not error:
                self.topics[name] = [self.partition_class(os.path.join(self.data_dir, f"{name}-{i}.log"))
                                     for i in range(max(partitions, 1))]
            results += self._string(name) + I16.pack(error)
        self._send(sock, correlation_id, bytes(results))

    def delete_topics(self, sock, frame, pos, version, correlation_id) -> None:
        (count,) = I32.unpack_from(frame, pos)
        pos += 4
        results = bytearray(I32.pack(count))
        for _ in range(count):
            name, pos = self._read_string(frame, pos)
            partitions = self.topics.pop(name, None)
            for i, p in enumerate(partitions or ()):
                os.close(p.fd)
                os.unlink(os.path.join(self.data_dir, f"{name}-{i}.log"))
            results += self._string(name) + I16.pack(0 if partitions is not None else UNKNOWN_TOPIC_OR_PARTITION)
        self._send(sock, correlation_id, bytes(results))

    def produce(self, sock, frame, pos, version, correlation_id) -> None:
        _, pos = self._read_string(frame, pos)  # transactional id
        acks, _timeout, topic_count = struct.unpack_from(">hii", frame, pos)
        pos += 10
        body = bytearray(I32.pack(topic_count))
        for _ in range(topic_count):
            name, pos = self._read_string(frame, pos)
            (partition_count,) = I32.unpack_from(frame, pos)
            pos += 4
            body += self._string(name) + I32.pack(partition_count)
            partitions = self.topics.get(name, ())
            for _ in range(partition_count):
                index, size = struct.unpack_from(">ii", frame, pos)
                pos += 8
                if index < len(partitions):
                    base, error = partitions[index].append(frame[pos:pos + size]), 0
                else:
                    base, error = -1, UNKNOWN_TOPIC_OR_PARTITION
                pos += max(size, 0)
                body += I32.pack(index) + I16.pack(error) + I64.pack(base) + I64.pack(-1)
                if version >= 5:
                    body += I64.pack(0)
                if version >= 8:
                    body += I32.pack(0) + I16.pack(-1)
        with self.appended:
            self.appended.notify_all()
        if acks != 0:
            self._send(sock, correlation_id, bytes(body) + I32.pack(0))

    def fetch(self, sock, frame, pos, version, correlation_id) -> None:
        _replica, max_wait_ms, min_bytes, max_bytes, _isolation, topic_count = struct.unpack_from(">iiiibi", frame, pos)
        pos += 21
        wanted = []
        for _ in range(topic_count):
            name, pos = self._read_string(frame, pos)
            (partition_count,) = I32.unpack_from(frame, pos)
            pos += 4
            for _ in range(partition_count):
                index, offset, limit = struct.unpack_from(">iqi", frame, pos)
                pos += 16
                wanted.append((name, index, offset, limit))
        deadline = time.monotonic() + max_wait_ms / 1000
        while True:
            ranges, total, remaining = [], 0, max_bytes
            for name, index, offset, limit in wanted:
                partitions = self.topics.get(name, ())
                p = partitions[index] if index < len(partitions) else None
                position, size = p.range_from(offset, min(limit, remaining)) if p else (0, 0)
                if total and size > remaining:
                    size = 0
                ranges.append((name, index, p, position, size))
                total += size
                remaining = max(remaining - size, 0)
            left = deadline - time.monotonic()
            if total >= min_bytes or left <= 0:
                break
            with self.appended:
                self.appended.wait(left)
        self._send_fetch(sock, correlation_id, ranges)

    def _send_fetch(self, sock, correlation_id, ranges) -> None:
        # The response header and each partition's header go as bytes; records by sendfile.
        by_topic: dict[str, list] = {}
        for r in ranges:
            by_topic.setdefault(r[0], []).append(r)
        pieces: list = [I32.pack(0) + I32.pack(len(by_topic))]
        for name, parts in by_topic.items():
            pieces.append(self._string(name) + I32.pack(len(parts)))
            for _, index, p, position, size in parts:
                error = 0 if p is not None else UNKNOWN_TOPIC_OR_PARTITION
                hwm = p.next_offset if p is not None else -1
                pieces.append(struct.pack(">ihqqii", index, error, hwm, hwm, -1, size))
                if size:
                    pieces.append((p.fd, position, size))
        length = 4 + sum(len(x) if isinstance(x, bytes) else x[2] for x in pieces)
        out = bytearray(I32.pack(length) + I32.pack(correlation_id))
        for piece in pieces:
            if isinstance(piece, bytes):
                out += piece
                continue
            sock.sendall(out)
            out = bytearray()
            fd, position, size = piece
            while size:
                sent = os.sendfile(sock.fileno(), fd, position, size)
                position += sent
                size -= sent
        sock.sendall(out)


def main() -> None:
    port, data_dir = int(sys.argv[1]), sys.argv[2]
    # An optional third argument: the receive buffer, -1 for the OS's (Linux autotunes it).
    receive_buffer = int(sys.argv[3]) if len(sys.argv) > 3 else 102400
    server = Ceiling("127.0.0.1", port, data_dir)
    listener = socket.create_server(("127.0.0.1", port), backlog=1024)
    server.port = listener.getsockname()[1]
    print(f"listening on 127.0.0.1:{server.port}", flush=True)
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Kafka's socket.send.buffer.bytes, as Samsa uses: on this machine's loopback it is the
        # fastest setting (the OS default's autotuned buffers cost the sender system time).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 102400)
        # And Kafka's socket.receive.buffer.bytes: a request then arrives in the same pieces as
        # Samsa's (the OS default's autotuned megabytes took a 1 MB request in 2 reads, not 9).
        if receive_buffer > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        threading.Thread(target=server.serve_connection, args=(sock,), daemon=True).start()


if __name__ == "__main__":
    main()
