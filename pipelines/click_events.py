"""Click events for the click-count pipeline: JSON `{"user": ..., "page": ..., "ts": ...}` (ts in
epoch milliseconds, the event time), keyed by user, produced to a topic at a set rate.

The events are made from a seed, so a test knows every count in advance. Every `late_every`-th
event is out of order: its time is up to `max_lateness_ms` before the events around it (a click
that reached the producer late), which a watermark longer than that still counts. Every
`too_late_every`-th is `too_late_ms` behind: once the watermark has passed it, Spark drops it.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from typing import Iterable

PAGES = ("/", "/cart", "/checkout", "/product", "/search")


@dataclass(frozen=True)
class Click:
    user: str
    page: str
    ts: int  # event time, epoch ms

    def to_json(self) -> bytes:
        return json.dumps({"user": self.user, "page": self.page, "ts": self.ts}).encode()


def click_events(count: int, start_ms: int, interval_ms: int = 250, seed: int = 0, users: int = 20,
                 late_every: int = 7, max_lateness_ms: int = 4000,
                 too_late_every: int = 0, too_late_ms: int = 60_000) -> list[Click]:
    """`count` clicks, the i-th at start_ms + i * interval_ms unless it is one of the late ones."""
    rnd = random.Random(seed)
    clicks = []
    for i in range(count):
        ts = start_ms + i * interval_ms
        if too_late_every and i % too_late_every == too_late_every - 1:
            ts -= too_late_ms
        elif late_every and i % late_every == late_every - 1:
            ts -= rnd.randint(max_lateness_ms // 4, max_lateness_ms)
        clicks.append(Click(f"user-{rnd.randrange(users)}", rnd.choice(PAGES), ts))
    return clicks


def librdkafka_logging(verbose: bool) -> dict[str, int]:
    """The confluent-kafka clients' logging config: librdkafka's own lines (`%6|...|GETSUBSCRIPTIONS|...`,
    a broker connection's loss) only with -v. Without, failures still reach the pipeline as
    exceptions and delivery errors, which it reports itself."""
    return {} if verbose else {"log_level": 0}


def produce(bootstrap: str, topic: str, clicks: Iterable[Click], rate: float = 0.0, verbose: bool = False) -> int:
    """Produce the clicks in order, `rate` per second (0: as fast as the broker takes them); keyed
    by user, so one user's clicks stay in one partition. Returns how many were acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         **librdkafka_logging(verbose)})
    failures: list[str] = []

    def delivered(err, msg):
        if err is not None:
            failures.append(str(err))

    sent = 0
    began = time.monotonic()
    for click in clicks:
        if rate > 0:
            delay = began + sent / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # pacing the producer, not waiting for an event
        producer.produce(topic, key=click.user.encode(), value=click.to_json(), callback=delivered)
        producer.poll(0)
        sent += 1
    left = producer.flush(30)
    if left or failures:
        raise RuntimeError(f"{left} clicks not delivered to {topic}; errors: {failures[:3]}")
    return sent
