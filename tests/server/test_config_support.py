"""server/config/config_support.py against the code: what it calls honoured is read, what the code reads
is classified; and docs/configuration.md is what tools/gen_config_doc.py writes from it."""

import dataclasses
import re
import runpy
from pathlib import Path

from samsa.server.config import config_support as support
from samsa.server.security.authorizer import AUTHORIZER_CONFIGS
from samsa.server.metrics.configs import METRICS_CONFIGS
from samsa.server.config.broker_config_defs import BROKER_CONFIGS
from samsa.storage.log_config import LogConfig
from samsa.storage.topic_config_defs import TOPIC_CONFIGS

REPO = Path(__file__).resolve().parents[2]
# Modules that define or classify configs rather than read them.
NOT_READERS = {"server/config/broker_config_defs.py", "storage/topic_config_defs.py", "server/config/config_support.py"}
# Configs whose names the code builds from a prefix: the prefix and the module that reads them.
READ_BY_PREFIX = {"group.consumer.": "server/coordinators/consumer_groups.py"}


def _sources() -> dict[str, str]:
    return {
        path.relative_to(REPO).as_posix(): path.read_text()
        for package in ("server", "storage", "coordinator", "client")  # client/tls.py: the listeners' ssl.*
        for path in (REPO / package).rglob("*.py")
        if path.relative_to(REPO).as_posix() not in NOT_READERS
    }


SOURCES = _sources()
ALL_BROKER_CONFIGS = BROKER_CONFIGS | AUTHORIZER_CONFIGS | METRICS_CONFIGS


def _quoted(name: str, text: str) -> bool:
    return re.search(r"[\"']" + re.escape(name) + r"[\"']", text) is not None


def _named_in_code(name: str) -> bool:
    if any(_quoted(name, text) for text in SOURCES.values()):
        return True
    return any(name.startswith(prefix) and _quoted(name.removeprefix(prefix), SOURCES[module])
               for prefix, module in READ_BY_PREFIX.items())


def test_every_classified_name_is_a_config():
    broker = (support.HONOURED_BROKER_CONFIGS.keys() | support.IGNORED_BROKER_CONFIGS.keys()
              | support.REFUSED_BROKER_CONFIGS.keys() | support.REFUSED_BROKER_VALUES.keys())
    assert broker - ALL_BROKER_CONFIGS.keys() == set()
    topic = support.HONOURED_TOPIC_CONFIGS.keys() | support.IGNORED_TOPIC_CONFIGS.keys()
    assert topic - TOPIC_CONFIGS.keys() == set()
    assert support.HONOURED_TOPIC_CONFIGS.keys() & support.IGNORED_TOPIC_CONFIGS.keys() == set()
    groups = [support.HONOURED_BROKER_CONFIGS, support.IGNORED_BROKER_CONFIGS, support.REFUSED_BROKER_CONFIGS,
              support.REFUSED_BROKER_VALUES]
    for index, group in enumerate(groups):
        for other in groups[index + 1:]:
            assert group.keys() & other.keys() == set()


def test_every_classified_group_config_is_one_and_every_honoured_one_reaches_a_share_group():
    from samsa.coordinator.group_config import GROUP_CONFIGS, GroupConfigManager

    classified = support.HONOURED_GROUP_CONFIGS.keys() | support.IGNORED_GROUP_CONFIGS.keys()
    assert classified - GROUP_CONFIGS.keys() == set()
    assert support.HONOURED_GROUP_CONFIGS.keys() & support.IGNORED_GROUP_CONFIGS.keys() == set()
    # An honoured group config changes what GroupConfigManager.share_config answers.
    broker = {"group.share.min.record.lock.duration.ms": 15000, "group.share.max.record.lock.duration.ms": 60000,
              "group.share.min.delivery.count.limit": 2, "group.share.max.delivery.count.limit": 10,
              "group.share.min.partition.max.record.locks": 100, "group.share.max.partition.max.record.locks": 4000,
              "group.share.min.heartbeat.interval.ms": 5000, "group.share.max.heartbeat.interval.ms": 15000,
              "group.share.min.session.timeout.ms": 45000, "group.share.max.session.timeout.ms": 60000,
              "group.share.min.assignment.interval.ms": 0, "group.share.max.assignment.interval.ms": 15000,
              "group.share.record.lock.duration.ms": 30000, "group.share.delivery.count.limit": 5,
              "group.share.partition.max.record.locks": 2000, "group.share.heartbeat.interval.ms": 5000,
              "group.share.session.timeout.ms": 45000, "group.share.assignment.interval.ms": 1000}
    changed = {"share.assignment.interval.ms": "2000", "share.auto.offset.reset": "earliest",
               "share.delivery.count.limit": "7", "share.heartbeat.interval.ms": "6000",
               "share.isolation.level": "read_committed", "share.partition.max.record.locks": "3000",
               "share.record.lock.duration.ms": "40000", "share.renew.acknowledge.enable": "false",
               "share.session.timeout.ms": "50000"}
    assert changed.keys() == {k for k in support.HONOURED_GROUP_CONFIGS if k.startswith("share.")}
    manager = GroupConfigManager(broker.__getitem__)
    before = manager.share_config("g")
    for name, value in changed.items():
        manager.update_group_config("g", {name: value})
        assert manager.share_config("g") != before, name


def test_every_honoured_or_refused_broker_config_is_read_by_the_code():
    claimed = (support.HONOURED_BROKER_CONFIGS.keys() | support.REFUSED_BROKER_CONFIGS.keys()
               | support.REFUSED_BROKER_VALUES.keys())
    assert sorted(name for name in claimed if not _named_in_code(name)) == []


def test_every_broker_config_the_code_names_is_classified():
    topic_defaults = {d.server_default_property for d in TOPIC_CONFIGS.values()}
    classified = (support.HONOURED_BROKER_CONFIGS.keys() | support.IGNORED_BROKER_CONFIGS.keys()
                  | support.REFUSED_BROKER_CONFIGS.keys() | support.REFUSED_BROKER_VALUES.keys() | topic_defaults)
    named = {name for name in ALL_BROKER_CONFIGS if _named_in_code(name)}
    assert sorted(named - classified) == [], "classify these in server/config/config_support.py"


def _log_config_reads() -> dict[str, set[str]]:
    """LogConfig's attributes and properties each topic config is read through, outside storage/log_config.py."""
    log_config = (REPO / "storage" / "log_config.py").read_text()
    properties = re.findall(r"def (\w+)\(self[^)]*\)[^:]*:\n((?:        .*\n|\n)+)", log_config)
    reads: dict[str, set[str]] = {}
    for field in dataclasses.fields(LogConfig):
        through = {field.name} | {prop for prop, body in properties if f"self.{field.name}" in body}
        reads[field.metadata["name"]] = {
            attribute for attribute in through
            if any(re.search(rf"\.{attribute}\b", text) for module, text in SOURCES.items()
                   if module != "storage/log_config.py")
        }
    return reads


def test_honoured_topic_configs_are_read_and_ignored_ones_are_not():
    reads = _log_config_reads()
    unread = sorted(name for name in support.HONOURED_TOPIC_CONFIGS if not reads[name]
                    and not any(_quoted(name, text) for module, text in SOURCES.items()
                                if module not in ("storage/log_config.py", "server/config/topic_configs.py")))
    assert unread == []
    ignored = set(TOPIC_CONFIGS) - support.HONOURED_TOPIC_CONFIGS.keys()
    assert {name: reads[name] for name in sorted(ignored) if reads[name]} == {}


def test_a_topic_default_follows_its_topic_config():
    assert support.broker_support("log.retention.bytes").status == support.HONOURED
    assert support.broker_support("log.local.retention.ms").status == support.IGNORED
    assert support.broker_support("principal.builder.class").status == support.REFUSED


def test_docs_configuration_md_is_what_the_generator_writes():
    generator = runpy.run_path(str(REPO / "tools" / "gen_config_doc.py"))
    committed = (REPO / generator["OUTPUT"]).read_text()
    assert committed == generator["render"](), "docs/configuration.md is stale: run python tools/gen_config_doc.py"
