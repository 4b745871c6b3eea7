"""A real Broker (as tests/server/loopback.py starts one) in its own thread with its own trio loop,
so that a test calls `samsa.__main__.main([...])` (which runs trio itself) against it."""

from __future__ import annotations

import threading

import trio

from samsa.server.broker import Broker


class BrokerThread:
    """Start with `start(config)`: returns once the broker listens; `stop()` cancels it."""

    def __init__(self) -> None:
        self.ports: dict[str, int] = {}
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self, config) -> BrokerThread:
        self._thread = threading.Thread(target=self._run, args=(config,), daemon=True)
        self._thread.start()
        if not self._ready.wait(30) or self._failure is not None:
            raise RuntimeError(f"the broker did not start: {self._failure!r}")
        return self

    def _run(self, config) -> None:
        async def serve() -> None:
            broker = Broker(config)
            self._token = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                self._cancel = nursery.cancel_scope
                await nursery.start(broker.run)
                self.ports = {e.listener: e.port for e in broker.endpoints}
                self._ready.set()

        try:
            trio.run(serve)
        except BaseException as e:  # noqa: BLE001 - reported by start()
            self._failure = e
            self._ready.set()

    def stop(self) -> None:
        if self._token is not None and self._cancel is not None:
            try:
                trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        if self._thread is not None:
            self._thread.join(30)
