"""Data pipelines on Samsa: PySpark Structured Streaming jobs that read and write through Spark's own
Kafka connector (spark-sql-kafka-0-10), run by `samsa pipeline NAME`.

* spark_session.py: a local SparkSession with the connector's jars from the cache that
  scripts/fetch-jars.sh fills (profile spark), so nothing downloads at run time.
* click_events.py: the click generator (JSON events, late and out-of-order ones among them).
* clicks.py: the click-count job (10 s event-time windows with a watermark, to a Kafka topic and to
  Parquet), its report, and the `samsa pipeline clicks` command.
* local_broker.py: a `samsa serve` of its own when no bootstrap server is given.

Needs the `pipeline` extra: `pip install -e '.[pipeline]'` and `bash scripts/fetch-jars.sh spark`.
"""
