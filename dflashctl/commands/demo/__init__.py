"""`dflashctl demo`: `run` on the demo pair, then the field story (README.md)."""
