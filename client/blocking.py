"""A connection to a broker over a blocking socket, on the same framing as connection.py's: for
callers without a trio loop (the compatibility tests, which drive real clients and brokers from
plain pytest functions). Not for the broker: a blocking read would stop its loop."""

from __future__ import annotations

import socket
from typing import Any

from ..wire.codec import Message
from .errors import BrokerUnreachable
from .framing import FrameReader, Requests


class BlockingConnection:
    """`BlockingConnection.connect(host, port)`, then `call`; a read that waits longer than
    `timeout` seconds raises TimeoutError."""

    def __init__(self, sock: socket.socket, client_id: str | None) -> None:
        self.sock = sock
        self._requests = Requests(client_id)
        self._frames = FrameReader()

    @classmethod
    def connect(cls, host: str, port: int, client_id: str | None = "samsa", timeout: float = 15.0) -> BlockingConnection:
        return cls(socket.create_connection((host, port), timeout=timeout), client_id)

    @property
    def client_id(self) -> str | None:
        return self._requests.client_id

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, message: Message, version: int) -> Any:
        """The response to `message`, sent at `version`."""
        self.send(message, version)
        return self.receive()

    def send(self, message: Message, version: int) -> None:
        """Send `message` without waiting for its response (`receive` returns it)."""
        self.sock.sendall(self._requests.encode(message, version))

    def receive(self) -> Any:
        """The response to the oldest request sent and not yet received."""
        return self._requests.decode(self.read_frame())[1]

    def read_frame(self) -> memoryview:
        """The next frame's body; BrokerUnreachable when the broker closes the connection first."""
        self._receive_exactly(self._frames.size_view)
        view = self._frames.body()
        self._receive_exactly(view)
        return view

    def _receive_exactly(self, view: memoryview) -> None:
        got = 0
        while got < len(view):
            try:
                n = self.sock.recv_into(view[got:])
            except ConnectionResetError:
                n = 0
            if n == 0:
                raise BrokerUnreachable("the broker closed the connection")
            got += n
