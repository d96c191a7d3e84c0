# Sourced by bin/dflashctl and bin/test: create .venv on first use and keep it in step with
# pyproject.toml. torch is pinned to the CPU build (2.13.0); an unpinned torch pulls a CUDA build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
TORCH_PIN="torch==2.13.0"
PY="${PYTHON:-python3}"

ensure_venv() {  # ensure_venv EXTRAS  (e.g. "engine" or "engine,test,plot")
    local extras="$1"
    local stamp="$VENV/.dflashctl-installed-$extras"
    local want
    want="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
    if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    echo "dflashctl: setting up $VENV (extras: $extras) ..." >&2
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$TORCH_PIN" numpy >&2
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT[$extras]" "$TORCH_PIN" >&2
    echo "$want" > "$stamp"
}
