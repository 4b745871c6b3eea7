"""InOrderResponses: one connection's responses answered one at a time, in the order put."""

from __future__ import annotations

import trio
import trio.testing

from samsa.server.network.in_order_responses import InOrderResponses


class Responder:
    """Answers an entry once the test releases it; records the order of the answers."""

    def __init__(self) -> None:
        self.released: dict[str, trio.Event] = {}
        self.answered: list[str] = []

    def release(self, entry: str) -> None:
        self.released.setdefault(entry, trio.Event()).set()

    async def __call__(self, entry: str) -> None:
        await self.released.setdefault(entry, trio.Event()).wait()
        if entry == "broken":
            raise OSError("connection reset")
        self.answered.append(entry)


def run(scenario) -> None:
    async def main():
        async with trio.open_nursery() as nursery:
            responder = Responder()
            await scenario(InOrderResponses(nursery, responder, limit=2), responder)

    trio.run(main)


def test_entries_are_answered_in_the_order_put_whichever_is_ready_first():
    async def scenario(responses, responder):
        await responses.put("first")
        await responses.put("second")
        responder.release("second")
        await trio.testing.wait_all_tasks_blocked()
        assert responder.answered == [] and responses.pending == 2
        responder.release("first")
        await responses.drained()
        assert responder.answered == ["first", "second"] and responses.pending == 0
        responses.close()

    run(scenario)


def test_a_full_queue_holds_the_reader_back_until_the_first_is_answered():
    async def scenario(responses, responder):
        await responses.put("first")
        await responses.put("second")
        put_third = trio.Event()

        async def third():
            await responses.put("third")
            put_third.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(third)
            await trio.testing.wait_all_tasks_blocked()
            assert not put_third.is_set()
            responder.release("first")
            await put_third.wait()
        for entry in ("second", "third"):
            responder.release(entry)
        responses.close()
        await responses.drained()
        assert responder.answered == ["first", "second", "third"]

    run(scenario)


def test_a_failed_answer_stops_the_connection_and_leaves_the_rest_unanswered():
    async def main():
        responder = Responder()
        async with trio.open_nursery() as nursery:
            responses = InOrderResponses(nursery, responder, limit=5)
            await responses.put("broken")
            await responses.put("after")
            responder.release("broken")
            await trio.sleep_forever()  # cancelled with the connection's nursery
        assert isinstance(responses.failure, OSError)
        assert responses.unanswered() == ["after"] and responder.answered == []

    trio.run(main)
