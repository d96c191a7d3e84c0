"""`dflashctl diagnose`: the drafter, its config or the engine? A server against the bundled engine
(docs/diagnose.md).
"""
