"""`samsa format --add-scram`: SCRAM users a broker knows from its first start, as kafka-storage's."""

from __future__ import annotations

import pytest

from samsa.server.main import main
from samsa.server.metadata.format_storage import FormatError, parse_scram
from samsa.wire.errors import ErrorCode

from security_helpers import config, run, sasl_scram
from loopback import Client


def test_formatted_users_log_in_over_scram(tmp_path, capsys):
    data = tmp_path / "data"
    assert main(["format", "--override", f"log.dirs={data}", "--cluster-id", "q1Sh-9_ISia_zwGINzRvyQ",
                 "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
                 "-S", 'SCRAM-SHA-256=[name="ops",password="a,b",iterations=8192]']) == 0
    assert "cluster.id=q1Sh-9_ISia_zwGINzRvyQ" in (data / "meta.properties").read_text()
    assert main(["format", "--override", f"log.dirs={data}"]) == 1
    assert "already formatted" in capsys.readouterr().err
    assert main(["format", "--override", f"log.dirs={data}", "--ignore-formatted"]) == 0

    async def scenario(broker, ports):
        assert broker.cluster_id == "q1Sh-9_ISia_zwGINzRvyQ"
        for mechanism, user, password in (("SCRAM-SHA-512", "admin", "admin-secret"), ("SCRAM-SHA-256", "ops", "a,b")):
            client = await Client.connect(ports["SASL_PLAINTEXT"])
            assert (await sasl_scram(client, mechanism, user, password)).error_code == ErrorCode.NONE

    run(config(tmp_path, "SASL_PLAINTEXT://127.0.0.1:0", **{"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}),
        scenario)


@pytest.mark.parametrize("spec, message", [
    ("SCRAM-SHA-1=[name=a,password=b]", "expected SCRAM-SHA-256"),
    ("SCRAM-SHA-256=[name=a]", "name and password are required"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=100]", "4096..16384"),
    ("SCRAM-SHA-256=[name=a,password]", "not key=value"),
])
def test_bad_scram_specs(spec, message):
    with pytest.raises(FormatError, match=message):
        parse_scram(spec)
