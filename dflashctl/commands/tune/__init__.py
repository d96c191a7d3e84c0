"""`dflashctl tune`: choose K by measured decode speed (docs/tune.md)."""
