"""Known engine defects (noun; never prints).

Modules: `catalogue` (defects.yaml: every entry's versions, build, runner, conditions, effect,
fix; parsed with one-line errors), `predicates` (what is known of a server and a drafter:
`Facts`, and the predicates conditions name), `k_norm` (the drafter's k_norm weights, read
without loading the model), `match` (entries against facts: confirmed, likely or possible; the
causes of an alarm), `markdown` (docs/known-defects.md's generated section).
"""
