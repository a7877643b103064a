#!/usr/bin/env bash
# Two jobs of one classifier at once, with and without the derived store's lock (docs/benchmarks.md, "Parallel
# jobs on one classifier"): a joblib multirun of 2 jobs (gradient, occlusion; one thread each), NAOPC's beam
# bounds on 6 examples, each checkout from an empty cache. Prints, per checkout, the multirun's wall and CPU
# time and, per job, whether it reused the bounds another job computed.
#   bench/derived_lock.sh <checkout before> <checkout after> <empty output folder>
# Run it from an activated environment with itermask's dependencies (each checkout's src/ goes on PYTHONPATH).
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 <checkout before> <checkout after> <output folder>" >&2; exit 2; }
out=$(realpath -m "$3"); mkdir -p "$out"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
for pair in "before=$1" "after=$2"; do
  name=${pair%%=*}; code=$(realpath "${pair#*=}")
  echo "== $name: $(git -C "$code" log --oneline -1 | cut -c1-7) $(date -u +%T)"
  (cd "$code" && ITERMASK_CACHE="$out/cache_$name" PYTHONPATH="$code/src" \
    /usr/bin/time -f "wall %e s, user %U s, sys %S s, peak RSS %M KB" -o "$out/time_$name.txt" \
    python evaluate.py -m saliency=gradient,occlusion naopc=on naopc.max_examples=6 evaluation.n_examples=20 \
    threads=1 hydra/launcher=joblib hydra.launcher.n_jobs=2 '~hydra.callbacks.report' \
    hydra.sweep.dir="$out/sweep_$name" > "$out/log_$name.txt" 2>&1)
  cat "$out/time_$name.txt"
  for job in 0 1; do
    log="$out/sweep_$name/$job/evaluate.log"
    echo "job $job: computed the bounds $(grep -c 'AOPC bounds took' "$log" || true) time(s), reused them" \
      "$(grep -c 'reusing the naopc bounds' "$log" || true) time(s)"
  done
done
