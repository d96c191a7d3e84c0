"""`dflashctl run`: a playbook's fetch, verify-config, serve, smoke and metrics per host
(docs/playbooks.md).
"""
