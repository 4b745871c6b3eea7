"""A raw Kafka protocol client for the compatibility tests: Samsa's own codec (samsa.wire.protocol)
over a plain blocking socket, so a test can send exactly the same bytes to Samsa and to Kafka and
read back every field of the answer, or send what no real client would (an unsupported version)."""

from __future__ import annotations

import socket
import struct

from samsa.wire.protocol import decode_response, encode_request

SIZE = struct.Struct(">i")
REQUEST_HEADER_V1 = struct.Struct(">hhi")  # api key, api version, correlation id (then client id)


class WireClient:
    def __init__(self, host: str, port: int, client_id: str = "differential", timeout: float = 15.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, message, version: int):
        """Send `message` at `version`, return the decoded response."""
        self.correlation_id += 1
        frame = self.exchange(encode_request(message, version, self.correlation_id, self.client_id))
        assert frame is not None, "the broker closed the connection"
        correlation_id, response = decode_response(frame, message.API_KEY, version)
        assert correlation_id == self.correlation_id
        return response

    def call_bytes(self, api_key: int, version: int, body: bytes = b"", flexible: bool = False) -> bytes | None:
        """A request with a v1 header (v2 with `flexible`: no tagged fields) and `body` as given: the
        response frame body, or None if the broker closed the connection instead of answering."""
        self.correlation_id += 1
        client_id = self.client_id.encode()
        payload = (REQUEST_HEADER_V1.pack(api_key, version, self.correlation_id)
                   + struct.pack(">h", len(client_id)) + client_id + (b"\0" if flexible else b"") + body)
        return self.exchange(SIZE.pack(len(payload)) + payload)

    def exchange(self, frame: bytes) -> bytes | None:
        self.sock.sendall(frame)
        head = self._read(4)
        if head is None:
            return None
        (size,) = SIZE.unpack(head)
        return self._read(size)

    def _read(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)
