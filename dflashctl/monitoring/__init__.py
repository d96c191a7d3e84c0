"""Acceptance where operators watch: Prometheus recording and alert rules built from dflashctl's
thresholds and registry (`rules`), and the `promtool test rules` cases that hold them
(`rule_tests`). No printing; the `alerts` command writes what these return."""
