"""An inference server seen from outside (noun; never prints).

Modules: `client` (OpenAI-style chat over HTTP and SSE, timed), `engines` (the command line of
each engine), `logscan` (fatal lines and their root causes), `deployments` (the state files of
servers dflashctl started), `plan` (options resolved into an engine command for a host),
`launch` (pre-launch checks, start, readiness), `control`
(stop, status), `book` (options and playbooks to launches).
"""
