#!/usr/bin/env bash
# Start or stop Apache Kafka by hand, as the compat tests run it (compat-tests/kafka_oracle.py):
#   scripts/kafka-oracle.sh start kafka4 [--override key=value ...]   Kafka 4.x, KRaft, one node
#   scripts/kafka-oracle.sh start kafka39                             Kafka 3.9 + ZooKeeper
#   scripts/kafka-oracle.sh stop kafka4|kafka39
# `start` prints the bootstrap address (127.0.0.1:PORT). Servers run in
# $SAMSA_ORACLE_DIR/<profile> (default /tmp/samsa-oracle-$USER/<profile>), logs included; the jars
# come from `bash scripts/fetch-jars.sh kafka4 kafka39`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" compat-tests/kafka_oracle.py "$@"
