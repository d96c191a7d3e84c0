"""The commands, one package each (verbs). A command holds only what it alone needs: its Typer
signature, its orchestration returning a report, and its renderer (the only module that prints).
Whatever a second command needs lives in a noun package (`drafter`, `hosts`, `server`,
`metrics`, `defects`, `engine`, `playbook`). Commands never import each other, except `run` and
`demo`, which are made of other commands.
"""
