"""verify-config's rules, by topic: `base` (the row type and the context every rule writes
into), `config` (structure, mask token, target layer ids, layer types, block, the rest),
`weights` (the safetensors header against the config), `target` (the target's config, and what
each engine needs). `drafter.check.check_drafter` runs them all."""
