"""`dflashctl verify-config`: check a drafter's config.json and header against canonical values
(docs/verify-config.md).
"""
