"""Feature levels (server/features.py): what is finalized decides which APIs are served."""

from samsa.server.features import SHARE_GROUPS, BrokerFeatures
from samsa.server.handlers import Handler, ListenerType, load_handlers
from samsa.server.handlers.api_versions import api_keys


async def _handle(ctx, request):
    return None


def test_share_version_1_is_finalized_by_default_as_in_kafka():
    features = BrokerFeatures.create()
    assert features.level("share.version") == 1 and features.supported["share.version"] == (0, 1)
    assert features.level("group.version") == 1
    assert features.level("streams.version") == 1 and features.supported["streams.version"] == (0, 1)


def test_an_api_of_a_feature_is_served_only_while_the_feature_is_finalized():
    api = Handler(76, 1, 1, _handle, feature=SHARE_GROUPS)
    assert api.served(ListenerType.BROKER, BrokerFeatures.create())
    assert not api.served(ListenerType.BROKER, BrokerFeatures({"share.version": (0, 1)}, {"share.version": 0}))
    assert Handler(0, 0, 11, _handle).served(ListenerType.BROKER, BrokerFeatures({}, {}))


def test_apiversions_lists_the_share_apis_only_while_share_version_is_finalized():
    share_apis = {h.api_key for h in load_handlers().values() if h.feature == SHARE_GROUPS}
    assert share_apis == {76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}
    listed = {k.api_key for k in api_keys(ListenerType.BROKER, BrokerFeatures.create())}
    assert share_apis <= listed
    without = BrokerFeatures(BrokerFeatures.create().supported, {"group.version": 1})
    assert not share_apis & {k.api_key for k in api_keys(ListenerType.BROKER, without)}
