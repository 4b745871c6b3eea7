"""samsa consume and samsa produce with kafka-console-consumer's and kafka-console-producer's options:
Kafka's DefaultMessageFormatter and LineMessageReader on their own (expected lines from Kafka 4.4's
tools, compat-tests/test_console_tools.py compares the two live), then the options against a broker."""

from __future__ import annotations

import json
import struct

import group_broker
import pytest

from samsa.cli import CommandError
from samsa.cli.line_reader import LineMessageReader, LineParseError, split_lines
from samsa.cli.message_formatter import FormatError, MessageFormatter, java_number
from samsa.cli.partitioner import partition_for_key
from samsa.cli.record_io import OutputRecord
from samsa.wire.records import LOG_APPEND_TIME

broker = group_broker.broker  # this module's broker, instead of conftest's

SERIALIZATION = "org.apache.kafka.common.serialization."
RECORD = OutputRecord("t", 2, 7, 1_700_000_000_000, b"k", b"v", [("h1", b"a"), ("h2", None)])


def line(record: OutputRecord = RECORD, **props: str) -> bytes:
    return MessageFormatter({k.replace("_", "."): v for k, v in props.items()}).format(record)


def test_the_formatter_prints_kafkas_fields_in_kafkas_order():
    assert line() == b"v\n"
    assert line(print_key="true") == b"k\tv\n"
    assert line(print_timestamp="true", print_partition="true", print_offset="true", print_delivery="true",
                print_epoch="true", print_headers="true", print_key="TRUE ") == (
        b"CreateTime:1700000000000\tPartition:2\tOffset:7\tDelivery:NOT_PRESENT\tEpoch:NOT_PRESENT\th1:a,h2:null\tk\tv\n")
    # the last field printed ends the line when the value is not printed
    assert line(print_offset="true", print_value="false") == b"Offset:7\n"
    assert line(print_key="true", print_value="false", key_separator=" => ") == b"k\n"
    assert line(print_headers="true", headers_separator="|", key_separator=";", line_separator="\r\n") == \
        b"h1:a|h2:null;v\r\n"
    assert line(RECORD._replace(key=None, value=None, headers=[]), print_key="true", print_headers="true",
                null_literal="<null>") == b"NO_HEADERS\t<null>\t<null>\n"
    appended = RECORD._replace(timestamp_type=LOG_APPEND_TIME)
    assert line(appended, print_timestamp="true", print_value="false") == b"LogAppendTime:1700000000000\n"


def test_deserializers_print_what_javas_tostring_prints():
    def value(data: bytes, name: str) -> bytes:
        return line(RECORD._replace(value=data), value_deserializer=SERIALIZATION + name)

    assert value(struct.pack(">q", -5), "LongDeserializer") == b"-5\n"
    assert value(struct.pack(">i", 2**31 - 1), "IntegerDeserializer") == b"2147483647\n"
    assert value(struct.pack(">h", -2), "ShortDeserializer") == b"-2\n"
    assert value(struct.pack(">d", 0.1), "DoubleDeserializer") == b"0.1\n"
    assert value(struct.pack(">f", 0.1), "FloatDeserializer") == b"0.1\n"
    assert value(b"\x01", "BooleanDeserializer") == b"true\n"
    assert value(b"caf\xc3\xa9 \xff", "StringDeserializer") == "café \ufffd\n".encode()
    assert value(b"a\\\x00~", "BytesDeserializer") == b"a\\x5C\\x00~\n"
    assert value(b"00000000-0000-0000-0000-00000000002A", "UUIDDeserializer") == \
        b"00000000-0000-0000-0000-00000000002a\n"
    with pytest.raises(FormatError) as refused:
        line(RECORD._replace(value=b"odd"), print_key="true", value_deserializer=SERIALIZATION + "LongDeserializer")
    assert str(refused.value) == "Size of data received by LongDeserializer is not 8"
    assert refused.value.written == b"k\t"  # Kafka's formatter has written the key and its separator
    with pytest.raises(CommandError) as unknown:
        MessageFormatter({"value.deserializer": "io.confluent.kafka.serializers.KafkaAvroDeserializer"})
    assert unknown.value.exit_code == 2 and "LongDeserializer" in str(unknown.value)


@pytest.mark.parametrize("number, text", [
    (1.0, "1.0"), (-0.0, "-0.0"), (0.001, "0.001"), (0.0001, "1.0E-4"), (1234567.0, "1234567.0"),
    (12345678.0, "1.2345678E7"), (1e21, "1.0E21"), (123.456, "123.456"), (float("nan"), "NaN"),
    (float("-inf"), "-Infinity"), (2.5e-7, "2.5E-7"), (-9223372036854775808, "-9223372036854775808"),
])
def test_numbers_print_as_java_prints_them(number, text):
    assert java_number(number) == text


def read(line_text: bytes, line_number: int = 1, **props: str):
    record = LineMessageReader({k.replace("_", "."): v for k, v in props.items()}).read(line_text, line_number)
    return record.key, record.value, record.headers


def test_the_reader_parses_kafkas_lines():
    assert read(b"k\tv") == (None, b"k\tv", [])
    assert read(b"k\tv\tw", parse_key="true") == (b"k", b"v\tw", [])
    assert read(b"h1:v1,h2:v2\tk\tv", parse_key="true", parse_headers="true") == (
        b"k", b"v", [("h1", b"v1"), ("h2", b"v2")])
    assert read(b"h1:v1\tv", parse_headers="true") == (None, b"v", [("h1", b"v1")])
    assert read(b"k::v", parse_key="true", key_separator="::") == (b"k", b"v", [])
    # headers.separator is a regular expression, and trailing empty pairs vanish (Java's split)
    assert read(b"a:1;;b:2,,\tv", parse_headers="true", headers_separator="[;]+") == (
        None, b"v", [("a", b"1"), ("b", b"2,,")])
    assert read(b"a:1,,\tv", parse_headers="true") == (None, b"v", [("a", b"1")])
    assert read(b"NUL\tNUL", parse_key="true", null_marker="NUL") == (None, None, [])
    assert read(b"h:NUL\tk\tv", parse_key="true", parse_headers="true", null_marker="NUL") == (
        b"k", b"v", [("h", None)])
    assert read(b"caf\xc3\xa9\t\xff", parse_key="true") == ("café".encode(), b"\xff", [])  # bytes kept


def test_the_reader_refuses_what_kafkas_refuses():
    with pytest.raises(LineParseError, match=r"^No key separator found on line number 3: 'no separator'$"):
        read(b"no separator", 3, parse_key="true")
    assert read(b"no separator", parse_key="true", ignore_error="true") == (None, b"no separator", [])
    with pytest.raises(LineParseError, match="No header key separator found in pair 'bad' on line number 1"):
        read(b"bad\tv", parse_headers="true")
    assert read(b"bad\tv", parse_headers="true", ignore_error="true") == (None, b"v", [("bad", None)])
    with pytest.raises(LineParseError, match="Header keys should not be equal to the null marker 'N'"):
        read(b"N:x\tv", parse_headers="true", null_marker="N")
    for props, message in (({"headers.separator": "\t"}, "headers.delimiter and headers.separator may not be equal"),
                           ({"null.marker": "\t"}, "null.marker and key.separator may not be equal")):
        with pytest.raises(CommandError, match=message):
            LineMessageReader(props)


def test_lines_split_as_javas_readline_splits_them():
    assert split_lines(b"a\nb\r\nc\rd", final=False) == ([b"a", b"b", b"c"], b"d")
    assert split_lines(b"a\r", final=False) == ([], b"a\r")  # a \n may follow
    assert split_lines(b"a\r\nb", final=False) == ([b"a"], b"b")
    assert split_lines(b"a\r", final=True) == ([b"a"], b"")
    assert split_lines(b"a\n\n", final=True) == ([b"a", b""], b"")
    assert split_lines(b"", final=True) == ([], b"")


def test_kafka_command_lines_round_trip(broker, samsa, stdin, topic):
    stdin(b"h1:v1,h2:v2\tk1\tone\nh1:v3\tk2\ttwo\r\n\tk3\tNUL\n")
    code, out, err = samsa("produce", "--bootstrap-server", broker, "--topic", topic, "--property", "parse.key=true",
                           "--reader-property", "parse.headers=true", "--property", "null.marker=NUL",
                           "--property", "ignore.error=true", "--request-required-acks", "1", "--compression-codec",
                           "--producer-property", "client.id=console", "--sync")
    assert (code, out, err) == (0, "", "")
    code, out, err = samsa("consume", "--bootstrap-server", broker, "--topic", topic, "--from-beginning",
                           "--max-messages", "3", "--property", "print.key=true", "--formatter-property",
                           "print.headers=true", "--property", "print.partition=true",
                           "--consumer-property", "client.id=console", "--isolation-level", "read_committed")
    assert code == 0, err
    partitions = {key: partition_for_key(key.encode(), 3) for key in ("k1", "k2", "k3")}
    assert sorted(out.splitlines()) == sorted([
        f"Partition:{partitions['k1']}\th1:v1,h2:v2\tk1\tone", f"Partition:{partitions['k2']}\th1:v3\tk2\ttwo",
        f"Partition:{partitions['k3']}\t:null\tk3\tnull"])  # "\tk3...": one header, empty key, no value
    code, out, _ = samsa("consume", topic, "-b", broker, "--partition", str(partitions["k1"]), "--offset", "0",
                         "--timeout-ms", "300", "-K", "=")
    assert out == "k1=one\n"


def test_where_consume_starts(broker, samsa, stdin, topic):
    stdin(b"v0\nv1\nv2\n")
    assert samsa("produce", topic, "-p", "0", "-b", broker)[0] == 0
    at = ["--topic", topic, "-b", broker, "--partition", "0", "--timeout-ms", "300"]
    assert samsa("consume", *at, "--offset", "1")[1] == "v1\nv2\n"
    assert samsa("consume", *at, "--offset", "latest")[1] == ""
    assert samsa("consume", *at, "--consumer-property", "auto.offset.reset=latest")[1] == ""
    assert samsa("consume", *at, "--consumer-property", "auto.offset.reset=earliest")[1] == "v0\nv1\nv2\n"
    code, _, err = samsa("consume", *at, "--consumer-property", "auto.offset.reset=none")
    assert code == 2 and f"Undefined offset with no reset policy for partitions: [{topic}-0]" in err
    code, _, err = samsa("consume", *at, "--from-beginning", "--consumer-property", "auto.offset.reset=latest")
    assert code == 2 and "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest'" in err
    code, _, err = samsa("consume", *at, "--from-beginning", "--offset", "1")
    assert code == 2 and "from-beginning and offset cannot be specified together" in err
    code, _, err = samsa("consume", *at, "--offset", "-1")
    assert code == 2 and "The provided offset value '-1' is incorrect" in err


def test_group_options(broker, samsa, stdin, topic, tmp_path):
    stdin(b"v0\nv1\nv2\nv3\n")
    assert samsa("produce", topic, "-p", "0", "-b", broker)[0] == 0
    config = tmp_path / "consumer.properties"
    config.write_text("group.id=from-the-file\n")
    at = ["--topic", topic, "-b", broker, "--max-messages", "1", "--timeout-ms", "2000"]
    assert samsa("consume", *at, "--consumer.config", str(config))[1] == "v0\n"
    assert samsa("consume", *at, "--command-config", str(config), "--group", "from-the-file")[1] == "v1\n"
    # without auto commit the group's position stays
    assert samsa("consume", *at, "--consumer.config", str(config), "--consumer-property",
                 "enable.auto.commit=false")[1] == "v2\n"
    assert samsa("consume", *at, "--consumer-property", "group.id=from-the-file")[1] == "v2\n"
    code, _, err = samsa("consume", *at, "--consumer.config", str(config), "--group", "another")
    assert code == 2 and "Detected group ids: 'another', 'from-the-file'" in err


def test_client_properties_go_over_the_config_file(broker, samsa, stdin, topic, tmp_path):
    """--producer.config's and --consumer.config's file, --producer-property and --consumer-property
    over it, as Kafka's tools merge them; a config that cannot be used, or a properties file that is
    malformed, is one line and exit 2."""
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=BOGUS\n")
    stdin(b"v\n")
    code, _, err = samsa("produce", topic, "-b", broker, "--producer.config", str(config))
    assert (code, err.count("\n")) == (2, 1) and f"invalid client config in {config}: security.protocol 'BOGUS'" in err
    stdin(b"v\n")
    assert samsa("produce", topic, "-b", broker, "-p", "0", "--producer.config", str(config),
                 "--producer-property", "security.protocol=PLAINTEXT") == (0, "", "")
    assert samsa("consume", topic, "-b", broker, "-e", "--consumer.config", str(config),
                 "--consumer-property", "security.protocol=plaintext") == (0, "v\n", "")
    code, _, err = samsa("consume", topic, "-b", broker, "--consumer-property", "request.timeout.ms=soon")
    assert (code, err) == (2, "samsa consume: invalid client config: request.timeout.ms 'soon' is not a number\n")
    config.write_text("client.id=\\uZZZZ\n")
    for command, option in [("consume", "--consumer.config"), ("consume", "--formatter-config"),
                            ("produce", "--producer.config"), ("produce", "--reader-config")]:
        stdin(b"v\n")
        code, _, err = samsa(command, topic, "-b", broker, option, str(config))
        assert (code, err.count("\n")) == (2, 1) and f"in {config}: Malformed \\uxxxx encoding" in err, err


def test_skipping_a_record_the_deserializer_refuses(broker, samsa, stdin, topic):
    stdin(b"12345678\nodd\nabcdefgh\n")
    assert samsa("produce", topic, "-p", "0", "-b", broker)[0] == 0
    at = ["--topic", topic, "-b", broker, "--from-beginning", "--max-messages", "3", "--property", "print.key=true",
          "--value-deserializer", SERIALIZATION + "LongDeserializer"]
    code, out, err = samsa("consume", *at, "--skip-message-on-error")
    longs = [struct.unpack(">q", v)[0] for v in (b"12345678", b"abcdefgh")]
    assert code == 0 and out == f"null\t{longs[0]}\nnull\tnull\t{longs[1]}\n"
    assert err == f"samsa consume: skipping {topic}-0 offset 1: Size of data received by LongDeserializer is not 8\n"
    code, out, err = samsa("consume", *at)
    assert code == 1 and out == f"null\t{longs[0]}\nnull\t"
    assert err == f"samsa consume: {topic}-0 offset 1: Size of data received by LongDeserializer is not 8\n"


def test_kafka_option_errors(broker, samsa, stdin, topic, tmp_path):
    code, _, err = samsa("consume", "-b", broker, "--timeout-ms", "1")
    assert (code, err) == (2, "samsa consume: no topic: give TOPIC or --topic TOPIC\n")
    code, _, err = samsa("consume", topic, "--topic", "other", "-b", broker)
    assert code == 2 and "two topics given" in err
    assert samsa("consume", topic, "-b", broker, "-f", "json", "--property", "print.key=true")[0] == 2
    stdin(b"x\n")
    code, _, err = samsa("produce", "--topic", topic, "-b", broker, "--producer-property", "acks=2")
    assert code == 2 and "Invalid value 2 for configuration acks" in err
    stdin(b"a\tb\nnone\nc\td\n")
    code, _, err = samsa("produce", "--topic", topic, "-b", broker, "--property", "parse.key=true", "-p", "1")
    assert (code, err) == (2, "samsa produce: No key separator found on line number 2: 'none'\n")
    code, out, _ = samsa("consume", topic, "-b", broker, "-p", "1", "-e", "-f", "json")
    assert [(r["key"], r["value"]) for r in map(json.loads, out.splitlines())] == [("a", "b")]  # sent before it
    reader_config = tmp_path / "reader.properties"
    reader_config.write_text("parse.key=true\nkey.separator=:\n")
    stdin(b"k:v\n")
    assert samsa("produce", "--topic", topic, "-b", broker, "--reader-config", str(reader_config), "-p", "2",
                 "--producer.config", str(tmp_path / "missing.properties"))[0] == 2
    stdin(b"k:v\n")
    assert samsa("produce", "--topic", topic, "-b", broker, "--reader-config", str(reader_config), "-p", "2")[0] == 0
    assert samsa("consume", topic, "-b", broker, "-p", "2", "-e", "-K", "=")[1] == "k=v\n"
