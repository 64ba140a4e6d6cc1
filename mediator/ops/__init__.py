"""What operators see: JSON logs, health endpoints, Prometheus metrics."""
