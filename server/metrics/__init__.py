"""The broker's Prometheus endpoint (metrics.port): what is counted on the request path
(request_metrics, topic_stats), what is read from the broker's state at scrape time (collectors),
and the small HTTP server that answers /metrics, /healthz and /readyz (http_server)."""
