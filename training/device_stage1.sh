#!/usr/bin/env bash
# On the GPU machine: corpus, tokenizer, target, prompts; results packed into $OUT (<= 15 MB parts).
set -euo pipefail
export PYTHONUNBUFFERED=1
python3 training/demo_pair.py --work .train --out .train/out \
    --stages corpus,tokenizer,target,prompts --deadline-minutes "${DEADLINE:-9.2}" "$@" 2>&1 | tee "$OUT/stage1.log"
tar cf - -C .train tokenizer.json target.pt prompts.pt corpus.json | split -b 15M - "$OUT/stage1.tar."
ls -la "$OUT"
