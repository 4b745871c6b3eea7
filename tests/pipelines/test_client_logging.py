"""The pipeline's confluent-kafka clients print nothing of librdkafka's own (`%6|...|GETSUBSCRIPTIONS|...`)
unless asked with -v: the same producer, verbose, shows the test would see such lines."""

from __future__ import annotations

import re

from samsa.pipelines.click_events import click_events, produce
from samsa.pipelines.clicks import create_topics

LIBRDKAFKA_LINE = re.compile(r"^%\d\|\d+\.\d+\|[A-Z_]+\|", re.MULTILINE)


def test_librdkafka_logs_only_when_verbose(broker, capfd):
    clicks = click_events(20, 1_700_000_000_000, seed=1)
    create_topics(broker, {"quiet-clicks": 1})
    assert produce(broker, "quiet-clicks", clicks) == 20
    quiet = capfd.readouterr()
    assert not LIBRDKAFKA_LINE.search(quiet.err), quiet.err
    assert quiet.out == ""

    create_topics(broker, {"verbose-clicks": 1}, verbose=True)
    assert produce(broker, "verbose-clicks", clicks, verbose=True) == 20
    verbose = capfd.readouterr()
    assert LIBRDKAFKA_LINE.search(verbose.err), "the verbose producer logged nothing: the quiet check proves nothing"
