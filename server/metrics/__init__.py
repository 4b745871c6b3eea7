"""The broker's Prometheus endpoint (metrics.port): what is counted on the request path
(request_metrics, topic_stats), what is read from the broker's state at scrape time (collectors),
the metrics clients push (KIP-714: client_telemetry, the OTLP they push read by otlp_metrics), and
the small HTTP server that answers /metrics, /healthz and /readyz (http_server)."""
