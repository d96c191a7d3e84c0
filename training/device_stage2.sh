#!/usr/bin/env bash
# On the GPU machine: continuations and drafter from stage 1's results (carried in .gpu-out/stage1),
# then the Hugging Face export; the pair is packed into $OUT.
set -euo pipefail
export PYTHONUNBUFFERED=1
mkdir -p .train
[ -f .train/target.pt ] || cat .gpu-out/stage1/stage1.tar.* | tar xf - -C .train
python3 training/demo_pair.py --work .train --out .train/out \
    --stages continuations,drafter,export --deadline-minutes "${DEADLINE:-9.2}" "$@" 2>&1 | tee "$OUT/stage2.log"
tar cf - -C .train/out target drafter | split -b 15M - "$OUT/pair.tar."
ls -la "$OUT"
