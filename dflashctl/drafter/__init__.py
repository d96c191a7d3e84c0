"""A DFlash drafter checkpoint, as engines read it (noun: used by several commands; never prints).

Modules: `config` (config.json resolved the way vLLM, SGLang and z-lab read it), `header` (the
safetensors header without loading tensors), `registry` (pinned drafters and their canonical
values, playbooks/drafters/*.yaml), `check` (the verify-config rules and report), `fix` (atomic
repairs with a backup), `check_remote` (the same check on a serving host), `stale` (the field
story's stale rewrites).
"""
