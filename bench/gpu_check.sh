#!/usr/bin/env bash
# GPU timing of the masking evaluation and of each saliency method alone against their compute floors
# (issues 15, 23): examples/s and peak GPU memory, bf16 autocast, random-initialised MiniLM-config and
# RoBERTa-base-sized classifiers. For a GPU
# machine with no network that carries at most 64 MiB: prepare here, run there.
#
#   bench/gpu_check.sh prepare [--examples 1024]   # here (itermask's venv, a package index): writes .gpu_check/
#                                                  #   inputs.json (token ids, config; ~0.2 MB) and wheels/
#                                                  #   (captum, the one package the core needs that a CUDA
#                                                  #   PyTorch image usually lacks; EXTRA_WHEELS="name==version
#                                                  #   ..." adds more, e.g. transformers and its needs)
#   bench/gpu_check.sh run [--examples 512] [--models minilm roberta_base] [--token-budgets 8192 65536]
#                      [--methods gradient integrated_gradients lime kernel_shap occlusion deeplift]
#                      [--steps 50] [--samples 100] [--method-budget 65536]
#                      [--device cuda|cpu] [--json out.json]   # there, from the repository root, with
#                                                  #   .gpu_check/ carried along; --device cpu: a dry run
#
# `run` needs python3 with torch (CUDA build), transformers (model classes only), numpy and matplotlib
# (captum imports them); it installs a missing captum/transformers from .gpu_check/wheels into
# /tmp/itermask-gpu-site (no index needed) and imports itermask from src/ (no `pip install -e`).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${GPU_CHECK_DIR:-.gpu_check}
stage=${1:-}
[ $# -gt 0 ] && shift
case "$stage" in
  prepare)
    export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
    python bench/gpu_check.py prepare --out "$DIR" "$@"
    mkdir -p "$DIR/wheels"
    captum=$(python -c 'import importlib.metadata as m; print(m.version("captum"))')
    # shellcheck disable=SC2086
    python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any \
      -d "$DIR/wheels" "captum==$captum" ${EXTRA_WHEELS:-}
    du -sh "$DIR"
    ;;
  run)
    PY=${PYTHON:-python3}
    $PY -c 'import torch' || { echo "python3 has no torch: install a CUDA build of PyTorch first" >&2; exit 1; }
    site=/tmp/itermask-gpu-site
    for module in captum transformers; do
      if ! $PY -c "import $module" 2>/dev/null; then
        wheel=$(ls "$DIR"/wheels/"$module"-*.whl 2>/dev/null | head -n 1)
        [ -n "$wheel" ] || { echo "$module is missing and $DIR/wheels has no $module wheel (run prepare)" >&2; exit 1; }
        $PY -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheel"
      fi
    done
    export PYTHONPATH="$PWD/src:$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
    $PY bench/gpu_check.py run --inputs "$DIR/inputs.json" "$@"
    ;;
  *)
    echo "usage: bench/gpu_check.sh prepare [--examples N] | run [options of bench/gpu_check.py run]" >&2
    exit 2
    ;;
esac
