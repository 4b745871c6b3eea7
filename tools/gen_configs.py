"""Generate server/config/broker_config_defs.py and storage/topic_config_defs.py from Kafka's config tables.

Usage: python tools/gen_configs.py                      the tables Kafka 4.4's and 3.9's jars print
       python tools/gen_configs.py --jars DIR [DIR39]   the same, from other class-path directories
       python tools/gen_configs.py configuration.html   the tables Kafka's site includes

The tables are the HTML that Kafka's ConfigDef.toHtml writes: Kafka's build runs the main methods of
kafka.server.KafkaConfig (the broker's, with each config's dynamic update mode) and
org.apache.kafka.storage.internals.log.LogConfig (the topic's) into the site's generated/ directory,
which configuration.html pulls in with server-side includes (`<!--#include virtual="generated/..." -->`).
Here those main methods run from the jars that `scripts/fetch-jars.sh kafka4 kafka39` puts in
$SAMSA_CACHE/kafka4 and $SAMSA_CACHE/kafka39 (default ~/.cache/samsa/...), under this machine's java.

Clients see the newest Kafka: the topic configs are Kafka 4.4's, and so are the broker configs, followed
by the broker configs Kafka 3.9 has and 4.x dropped (ZooKeeper mode's zookeeper.*, broker.id.generation.enable,
inter.broker.protocol.version, ...), which Samsa still accepts; each broker config names the release whose
table it comes from (`kafka_version`).

Kafka 4 prints an empty Default for a config without one (ConfigDef.NO_DEFAULT_VALUE: node.id,
process.roles, controller.listener.names); it is None here, as a null default.

The tables depend on the JVM that prints them: Kafka's ssl.protocol and ssl.enabled.protocols defaults
are TLSv1.3 and TLSv1.2,TLSv1.3 on Java 11 and newer, TLSv1.2 on Java 8 (Kafka's SslConfigs).
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("SAMSA_CACHE", Path.home() / ".cache" / "samsa"))
KAFKA_JARS = CACHE / "kafka4"
# The ZooKeeper-era release whose broker configs that Kafka 4 dropped are kept.
ZOOKEEPER_ERA_JARS = CACHE / "kafka39"

BROKER_TABLE = "generated/kafka_config.html"
TOPIC_TABLE = "generated/topic_config.html"
# The classes whose main methods print each table (Kafka's genKafkaConfigDocs, genTopicConfigDocs).
TABLE_PRINTERS = {
    BROKER_TABLE: "kafka.server.KafkaConfig",
    TOPIC_TABLE: "org.apache.kafka.storage.internals.log.LogConfig",
}
KAFKA_JAR = re.compile(r"kafka-clients-(.+)\.jar")

INCLUDE = re.compile(r'<!--#include virtual="([^"]+)" -->')
ENTRY = re.compile(r"<li>\s*<h4>(.*?)</h4>(.*?)<table><tbody>(.*?)</tbody></table>\s*</li>", re.S)
ROW = re.compile(r"<tr><th>(.*?):</th><td>(.*?)</td></tr>", re.S)
# The doc is the entry's first paragraph; some docs nest a second <p> for notes.
FIRST_PARAGRAPH = re.compile(r"\s*<p>(.*?)(?:<p>|</p>)", re.S)
TAG = re.compile(r"<[^>]+>")
# Kafka prints time and size defaults with a human hint: "604800000 (7 days)".
DEFAULT_HINT = re.compile(r"\s+\([^)]*\)$")
# A sentence ends at . ! or ? followed by whitespace and anything but a lower-case letter, so
# "e.g. x" and "(i.e. becomes empty)" stay inside their sentence.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^a-z])")

NUMERIC_TYPES = {"int", "long", "short"}


@dataclass(frozen=True)
class ConfigDoc:
    name: str
    type: str
    default: object
    valid_values: str
    importance: str
    doc: str
    update_mode: str | None  # broker tables only
    server_default_property: str | None  # topic tables only
    kafka_version: str | None = None  # broker tables from jars: the release whose table lists it


def kafka_version(jars: Path) -> str | None:
    for jar in jars.glob("kafka-clients-*.jar"):
        match = KAFKA_JAR.fullmatch(jar.name)
        if match:
            return match[1]
    return None


def jar_tables(jars: Path = KAFKA_JARS) -> dict[str, str]:
    """The config tables printed by Kafka's own classes, by the name the site includes them under."""
    if kafka_version(jars) is None:
        raise SystemExit(f"no Kafka jars in {jars}: run bash scripts/fetch-jars.sh kafka4 kafka39")
    java = shutil.which("java")
    if java is None:
        raise SystemExit("no java on PATH: bash scripts/fetch-jars.sh installs one")
    tables = {}
    for virtual, main_class in TABLE_PRINTERS.items():
        # A JVM that prints a table and exits: C1 only and the serial collector start it fastest.
        run = subprocess.run([java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-cp", f"{jars}/*",
                              main_class], capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"java {main_class} failed ({run.returncode}): {run.stderr.strip()}")
        tables[virtual] = run.stdout
    return tables


def docs_tables(configuration: Path) -> dict[str, str]:
    """The config tables beside a copy of Kafka's configuration.html."""
    return {virtual: included_table(configuration, virtual) for virtual in TABLE_PRINTERS}


def included_table(configuration: Path, virtual: str) -> str:
    page = configuration.read_text()
    if virtual not in INCLUDE.findall(page):
        raise SystemExit(f"{configuration} does not include {virtual}")
    table = configuration.parent / virtual
    if not table.exists():
        raise SystemExit(
            f"{configuration} includes {virtual}, which is not beside it: put Kafka's generated config "
            f"tables (the site's <version>/generated/ directory) at {table.parent}"
        )
    return table.read_text()


def text_of(fragment: str) -> str:
    # Line breaks in Kafka's docs are <br> tags (and literal %n); both read as spaces.
    spaced = re.sub(r"<br\s*/?>|%n", " ", fragment)
    return " ".join(html.unescape(TAG.sub("", spaced)).split())


def first_sentence(doc: str) -> str:
    return SENTENCE_END.split(doc, maxsplit=1)[0]


def parse_default(config_type: str, text: str) -> object:
    if text in ("null", ""):  # "": no default at all
        return None
    if text == '""':
        return () if config_type == "list" else ""
    if config_type == "boolean":
        return {"true": True, "false": False}[text]
    if config_type in NUMERIC_TYPES:
        return int(DEFAULT_HINT.sub("", text))
    if config_type == "double":
        return float(text)
    if config_type == "list":
        return tuple(item.strip() for item in text.split(","))
    return text


def parse_table(table: str) -> list[ConfigDoc]:
    docs = []
    for heading, doc, rows in ENTRY.findall(table):
        name = text_of(heading)
        paragraph = FIRST_PARAGRAPH.match(doc)
        if paragraph is None:
            raise SystemExit(f"no doc paragraph for {name}")
        fields = {key: html.unescape(value) for key, value in ROW.findall(rows)}
        config_type = fields["Type"]
        server_default = fields.get("Server Default Property")
        docs.append(
            ConfigDoc(
                name=name,
                type=config_type,
                default=parse_default(config_type, fields["Default"]),
                valid_values=fields["Valid Values"],
                importance=fields["Importance"],
                doc=first_sentence(text_of(paragraph[1])),
                update_mode=fields.get("Update Mode"),
                server_default_property=None if server_default in (None, "null") else server_default,
            )
        )
    if not docs:
        raise SystemExit("no config entries found in a generated config table")
    return docs


def render(class_name: str, table_name: str, docstring: str, fields: list[tuple[str, str]], docs: list[ConfigDoc],
           source: str) -> str:
    lines = [
        f"# Generated by tools/gen_configs.py from {source}; do not edit.",
        f'"""{docstring}"""',
        "",
        "from typing import NamedTuple",
        "",
        "",
        f"class {class_name}(NamedTuple):",
    ]
    lines += [f"    {field}: {annotation}" for field, annotation in fields]
    lines += ["", "", f"{table_name}: dict[str, {class_name}] = {{"]
    for doc in docs:
        lines.append(f"    {doc.name!r}: {class_name}(")
        lines += [f"        {field}={getattr(doc, field)!r}," for field, _ in fields]
        lines.append("    ),")
    lines += ["}", ""]
    return "\n".join(lines)


DEFAULT_ANNOTATION = "bool | int | float | str | tuple[str, ...] | None"

BROKER_FIELDS = [
    ("name", "str"),
    ("type", "str"),
    ("default", DEFAULT_ANNOTATION),
    ("valid_values", "str"),
    ("importance", "str"),
    ("update_mode", "str"),
    ("kafka_version", "str | None"),
    ("doc", "str"),
]

TOPIC_FIELDS = [
    ("name", "str"),
    ("type", "str"),
    ("default", DEFAULT_ANNOTATION),
    ("valid_values", "str"),
    ("server_default_property", "str | None"),
    ("importance", "str"),
    ("doc", "str"),
]


def broker_configs(newest: str, newest_version: str | None, zookeeper_era: str | None,
                   zookeeper_era_version: str | None) -> list[ConfigDoc]:
    """The newest release's broker configs in its order, then the ZooKeeper-era release's that it no
    longer has, in theirs; each with the release it comes from."""
    configs = [replace(doc, kafka_version=newest_version) for doc in parse_table(newest)]
    names = {doc.name for doc in configs}
    older = [] if zookeeper_era is None else parse_table(zookeeper_era)
    return configs + [replace(doc, kafka_version=zookeeper_era_version) for doc in older if doc.name not in names]


def generate(tables: dict[str, str], source: str, zookeeper_era_tables: dict[str, str] | None = None,
             versions: tuple[str | None, str | None] = (None, None)) -> dict[str, str]:
    """The generated modules' text, by path relative to the repository root, from the config tables
    (`jar_tables` or `docs_tables`) and, for the broker configs that later releases dropped, the
    ZooKeeper-era release's; `versions` are the two releases'; `source` names them in the modules'
    first line."""
    broker = broker_configs(tables[BROKER_TABLE], versions[0],
                            None if zookeeper_era_tables is None else zookeeper_era_tables[BROKER_TABLE], versions[1])
    topic = parse_table(tables[TOPIC_TABLE])
    return {
        "server/config/broker_config_defs.py": render(
            "BrokerConfigDef",
            "BROKER_CONFIGS",
            "Apache Kafka's broker configs as its docs list them; update_mode is read-only, per-broker "
            "or cluster-wide; kafka_version is the release whose table lists it (Kafka 3.9's for the "
            "ZooKeeper-era configs Kafka 4 dropped, which Samsa still accepts).",
            BROKER_FIELDS,
            broker,
            source,
        ),
        "storage/topic_config_defs.py": render(
            "TopicConfigDef",
            "TOPIC_CONFIGS",
            "Apache Kafka's topic-level configs as its docs list them; server_default_property names "
            "the broker config that supplies the default.",
            TOPIC_FIELDS,
            topic,
            source,
        ),
    }


def generate_from_jars(jars: Path = KAFKA_JARS, zookeeper_era_jars: Path = ZOOKEEPER_ERA_JARS) -> dict[str, str]:
    newest, older = kafka_version(jars), kafka_version(zookeeper_era_jars)
    source = (f"Kafka {newest}'s KafkaConfig and LogConfig, and Kafka {older}'s KafkaConfig "
              "(scripts/fetch-jars.sh kafka4 kafka39)")
    return generate(jar_tables(jars), source, jar_tables(zookeeper_era_jars), (newest, older))


def main(argv: list[str]) -> None:
    if len(argv) > 1 and argv[1] != "--jars":
        configuration = Path(argv[1])
        modules = generate(docs_tables(configuration), "shared/kafka-docs/configuration.html")
    else:
        jars = Path(argv[2]) if len(argv) > 2 else KAFKA_JARS
        modules = generate_from_jars(jars, Path(argv[3]) if len(argv) > 3 else ZOOKEEPER_ERA_JARS)
    for path, text in modules.items():
        (ROOT / path).write_text(text)


if __name__ == "__main__":
    main(sys.argv)
