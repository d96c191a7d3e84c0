"""`dflashctl bench`: the matched benchmark on running servers (docs/bench.md)."""
