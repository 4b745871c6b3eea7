"""cli/client.py against a real broker: routing, --command-config (TLS, SASL), one-line errors."""

from __future__ import annotations

import pytest
import trio

from samsa.cli import CommandError
from samsa.cli.client import KafkaClient, check_error


def test_cluster_names_the_broker(broker, samsa):
    code, out, err = samsa("cluster", "-b", broker)
    assert code == 0, err
    assert "broker 0: 127.0.0.1:" in out


def test_an_unreachable_broker_is_one_line_and_exit_2(samsa, tmp_path):
    code, out, err = samsa("cluster", "-b", "127.0.0.1:1")
    assert code == 2
    assert err.startswith("samsa cluster: cannot reach a broker: cannot connect to 127.0.0.1:1")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_malformed_bootstrap_server_is_bad_usage(samsa):
    code, _, err = samsa("cluster", "-b", "localhost")
    assert (code, err) == (2, "samsa cluster: bad bootstrap server 'localhost': expected host:port\n")


@pytest.mark.parametrize("text, message", [
    ("security.protocol=BOGUS\n", "security.protocol 'BOGUS' is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ("client.id=\\uZZZZ\n", "Malformed \\uxxxx encoding"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n", "SASL_PLAINTEXT needs sasl.jaas.config"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.jaas.config=x required;\n",
     "sasl.mechanism GSSAPI is not supported here"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=x required username=\"a\"\n",
     "sasl.jaas.config: JAAS config entry not terminated by semi-colon"),
    ("security.protocol=SSL\nssl.truststore.location=/nonexistent/ca.pem\n", "Cannot read /nonexistent/ca.pem"),
    ("request.timeout.ms=soon\n", "request.timeout.ms 'soon' is not a number"),
])
def test_a_malformed_properties_file_is_one_line_and_exit_2(broker, samsa, tmp_path, text, message):
    path = tmp_path / "client.properties"
    path.write_text(text)
    code, _, err = samsa("cluster", "-b", broker, "--command-config", str(path))
    assert code == 2
    assert err.startswith(f"samsa cluster: invalid client config in {path}: ") and message in err, err
    assert err.count("\n") == 1


def test_a_missing_properties_file_is_exit_2(broker, samsa, tmp_path):
    code, _, err = samsa("cluster", "-b", broker, "--command-config", str(tmp_path / "absent.properties"))
    assert (code, err) == (2, f"samsa cluster: cannot read {tmp_path / 'absent.properties'}: No such file or directory\n")


def test_an_unknown_subcommand_is_bad_usage(samsa):
    code, _, err = samsa("no-such-command")
    assert code == 2
    assert "invalid choice: 'no-such-command'" in err


def test_routing_to_a_leader_and_a_coordinator(broker, samsa):
    assert samsa("topics", "create", "routed", "-p", "2", "-b", broker)[0] == 0

    async def scenario():
        async with KafkaClient(broker) as client:
            assert await client.leaders(["routed"]) == {("routed", 0): 0, ("routed", 1): 0}
            assert await client.leader("routed", 1) == 0
            assert await client.coordinator("some-group") == 0
            assert await client.controller() == 0
            with pytest.raises(CommandError, match="^routed-7: UNKNOWN_TOPIC_OR_PARTITION: "):
                await client.leader("routed", 7)

    trio.run(scenario)


def test_check_error_names_the_code():
    check_error(0)
    with pytest.raises(CommandError, match=r"^t: TOPIC_ALREADY_EXISTS: Topic with this name already exists\.$") as e:
        check_error(36, None, "t")
    assert e.value.exit_code == 1
    with pytest.raises(CommandError, match="^NOT_CONTROLLER: not me$"):
        check_error(41, "not me")
    with pytest.raises(CommandError, match="^error code 9999: unknown to this client$"):
        check_error(9999)
