"""`dflashctl metrics`: spec-decode metrics from logs or /metrics, alarms with likely causes
(docs/metrics.md).
"""
