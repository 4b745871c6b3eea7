"""samsa configs against a real broker: kafka-configs' describe lines, alter, the broker's refusals."""

from __future__ import annotations


def test_topic_configs_alter_then_describe(broker, samsa):
    samsa("topics", "create", "configured", "-b", broker)
    code, out, _ = samsa("configs", "alter", "--topic", "configured", "-c", "retention.ms=5000", "-b", broker)
    assert (code, out) == (0, "Completed updating config for topic configured.\n")
    code, out, _ = samsa("configs", "describe", "--topic", "configured", "-b", broker)
    assert (code, out) == (0, "Dynamic configs for topic configured are:\n"
                              "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000}\n")


def test_broker_defaults_and_one_broker(broker, samsa):
    code, out, _ = samsa("configs", "alter", "--broker-defaults", "-c", "log.cleaner.threads=2", "-b", broker)
    assert (code, out) == (0, "Completed updating default config for brokers in the cluster.\n")
    code, out, _ = samsa("configs", "describe", "--broker-defaults", "-b", broker)
    assert code == 0 and out.startswith("Default configs for brokers in the cluster are:\n")
    assert "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2}\n" in out
    code, out, _ = samsa("configs", "describe", "--broker", "0", "--all", "-b", broker)
    assert code == 0 and out.startswith("All configs for broker 0 are:\n")
    assert "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2, " \
           "DEFAULT_CONFIG:log.cleaner.threads=1}\n" in out


def test_the_broker_refusing_a_config_is_exit_1(broker, samsa):
    code, _, err = samsa("configs", "alter", "--broker", "0", "-c", "broker.id=7", "-b", broker)
    assert (code, err) == (1, "samsa configs: 0: INVALID_REQUEST: Cannot update these configs dynamically: "
                              "[broker.id]\n")


def test_an_entity_is_required_and_only_one(broker, samsa):
    assert samsa("configs", "describe", "-b", broker)[0] == 2
    assert samsa("configs", "describe", "--topic", "a", "--broker", "0", "-b", broker)[0] == 2
