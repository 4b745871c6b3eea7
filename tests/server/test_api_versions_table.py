"""What ApiVersions claims is a decision kept in api_versions.tsv, not whatever the codec decodes.

The table is checked against a real broker's reply, so regenerating wire/messages/ from newer
schemas cannot widen what Samsa advertises; changing a served range means changing the table too.
"""

from __future__ import annotations

import csv
import runpy
from pathlib import Path

import pytest
from loopback import Client, broker_config, run_broker

from samsa.server import handlers
from samsa.server.handlers import handler, load_handlers
from samsa.wire.protocol import ApiKey, request_class, response_class

TABLE = Path(__file__).with_name("api_versions.tsv")
REPO = Path(__file__).resolve().parents[2]

def table() -> list[tuple[int, str, int, int]]:
    with TABLE.open(newline="") as f:
        return [(int(row["api_key"]), row["name"], int(row["min_version"]), int(row["max_version"]))
                for row in csv.DictReader(f, delimiter="\t")]


def test_api_versions_reply_is_the_checked_in_table(tmp_path):
    expected = table()

    async def scenario(port):
        client = await Client.connect(port)
        ApiVersions = request_class(ApiKey.API_VERSIONS)
        for version, request in ((0, ApiVersions()),
                                 (3, ApiVersions(client_software_name="test", client_software_version="1.0"))):
            response = await client.call(request, version)
            served = [(k.api_key, ApiKey(k.api_key).name, k.min_version, k.max_version) for k in response.api_keys]
            assert served == expected, f"ApiVersions v{version} differs from {TABLE.name}"

    run_broker(broker_config(tmp_path), scenario)


def test_every_served_range_lies_inside_the_schema_and_is_stable():
    """Inside what the codec speaks: the newest schema's versions and those Kafka 3.9 still defined
    (REMOVED_VERSIONS, a prefix of VALID_VERSIONS or all of it: UpdateMetadata); never a version the newest schema marks unstable."""
    for api_key, served in load_handlers().items():
        for cls in (request_class(api_key), response_class(api_key)):
            lo, hi = cls.VALID_VERSIONS
            assert lo <= served.min_version <= served.max_version <= hi, (ApiKey(api_key).name, cls.__name__)
            if cls.REMOVED_VERSIONS is not None:
                assert cls.REMOVED_VERSIONS[0] == lo and cls.REMOVED_VERSIONS[1] <= hi, cls.__name__
        request = request_class(api_key)
        if request.LATEST_VERSION_UNSTABLE:
            assert served.max_version < request.VALID_VERSIONS[1], f"{ApiKey(api_key).name}: unstable version served"


def test_a_missing_handler_module_is_an_import_error(monkeypatch):
    monkeypatch.setattr(handlers, "MODULES", handlers.MODULES + ("no_such_api",))
    with pytest.raises(ModuleNotFoundError, match="no_such_api"):
        load_handlers()


def test_a_second_handler_for_an_api_is_refused():
    served = load_handlers()[ApiKey.PRODUCE]

    async def other(ctx, request):
        return None

    with pytest.raises(RuntimeError, match="two handlers"):
        handler(ApiKey.PRODUCE, 0, 3)(other)
    assert load_handlers()[ApiKey.PRODUCE] is served


def test_docs_compatibility_md_is_what_the_generator_writes():
    generator = runpy.run_path(str(REPO / "tools" / "gen_compat_doc.py"))
    committed = (REPO / generator["OUTPUT"]).read_text()
    assert committed == generator["render"](), "docs/compatibility.md is stale: run python tools/gen_compat_doc.py"


def test_the_listings_are_built_once_per_mode():
    from samsa.server.features import BrokerFeatures
    from samsa.server.handlers import ListenerType
    from samsa.server.handlers.api_versions import _listings, api_keys

    load_handlers()
    features = BrokerFeatures.create()
    for listener_type in ListenerType:
        listed = _listings(listener_type, features)
        assert _listings(listener_type, features) is listed  # every response shares them
        assert listed[0] == api_keys(listener_type)
    features.finalize({**features.finalized, "share.version": 0}, features.epoch + 1)  # an UpdateFeatures
    relisted = _listings(ListenerType.BROKER, features)
    assert [f.name for f in relisted[2]] == [f.name for f in listed[2] if f.name != "share.version"]
    assert _listings(ListenerType.BROKER, features) is relisted


def test_a_forwarding_broker_advertises_no_wider_than_the_active_controller():
    """ApiVersionsResponse.intersectForwardableApis: a forwarded API's versions narrowed to the
    controller's, left out when it serves none of them; the rest as the handlers declare them."""
    from samsa.server.handlers import ListenerType
    from samsa.server.handlers.api_versions import api_keys

    load_handlers()
    controller = {ApiKey.CREATE_TOPICS: (2, 7), ApiKey.DELETE_TOPICS: (1, 9), ApiKey.CREATE_ACLS: None,
                  ApiKey.DESCRIBE_QUORUM: (0, 1)}
    listed = {k.api_key: (k.min_version, k.max_version)
              for k in api_keys(ListenerType.BROKER, forwards=True, controller=controller)}
    own = {k.api_key: (k.min_version, k.max_version) for k in api_keys(ListenerType.BROKER, forwards=True)}
    assert (listed[ApiKey.CREATE_TOPICS], listed[ApiKey.DELETE_TOPICS], listed[ApiKey.DESCRIBE_QUORUM]) == (
        (2, 7), (1, 6), (0, 1))
    assert ApiKey.CREATE_ACLS not in listed and own[ApiKey.CREATE_ACLS] == (0, 3)
    assert listed[ApiKey.PRODUCE] == own[ApiKey.PRODUCE]
    assert ApiKey.DESCRIBE_QUORUM not in {k.api_key for k in api_keys(ListenerType.BROKER)}  # nowhere to forward
