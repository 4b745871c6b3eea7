"""Kafka's Java system properties, which Samsa reads where an operator sets them for Kafka: as `-D`
options in the KAFKA_OPTS environment variable (Kafka's bin/kafka-run-class.sh passes it to the
JVM), e.g. KAFKA_OPTS="-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file:///etc/kafka/jwks.json".
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping

# The URLs the OAUTHBEARER code may fetch (the JWKS endpoint; ConfigurationUtils.validateUrl):
# a comma-separated list, empty by default since Kafka 4.0, so that no URL is allowed unless listed.
ALLOWED_SASL_OAUTHBEARER_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"


def system_property(name: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of `-D<name>=<value>` in KAFKA_OPTS (the last one, as the JVM takes it), or the
    default; ValueError if KAFKA_OPTS cannot be split as a shell would."""
    options = (os.environ if environ is None else environ).get("KAFKA_OPTS", "")
    value = default
    for option in shlex.split(options):
        if option.startswith(f"-D{name}="):
            value = option[len(name) + 3:]
        elif option == f"-D{name}":
            value = ""
    return value
