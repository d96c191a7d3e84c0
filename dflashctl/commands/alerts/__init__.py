"""`dflashctl alerts`: Prometheus rules for speculative decoding (docs/monitoring.md)."""
