"""The log-backend boundary: one reader per backend (pod logs, Loki, Elasticsearch/OpenSearch,
plain files) returning a log-canary run's lines as the backend holds them."""
