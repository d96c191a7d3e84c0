"""`dflashctl serve`, `stop` and `status`: launch an engine locally or over SSH and know it is up
(docs/serve.md).
"""
