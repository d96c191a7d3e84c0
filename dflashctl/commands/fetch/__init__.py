"""`dflashctl fetch`: a drafter at its pinned commit, every file verified, a lock written
(docs/fetch.md).
"""
