"""`dflashctl serve`, `stop` and `status`: launch an engine locally or over SSH and know it is up.

Modules: `engines` (the command line per engine), `logscan` (fatal lines, root causes),
`state` (deployment state files), `launch` (plan, pre-launch checks, start, readiness),
`control` (stop, status), `book` (options and playbooks to launches), `render` (CLI output).
docs/serve.md is the reference. Nothing is imported here, so `import dflashctl.serve.engines`
stays light.
"""
