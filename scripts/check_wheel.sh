#!/usr/bin/env bash
# itermask as a user who installs its wheel gets it: the wheel built from this checkout, installed with its
# dependencies (from the package index) into a fresh virtual environment outside the checkout, then, from an empty
# folder, the smoke job through the console script and the facade's documented example (docs/python-api.md) on
# the smoke job's classifier. CI (.ci/run) runs it; about 3 minutes on 2 cores with pip's cache warm.
#
#   scripts/check_wheel.sh [python]     # python: the interpreter of the fresh environment (default python3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${1:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip wheel --quiet --no-deps -w "$work/dist" "$root"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet torch==2.13.0  # the CPU wheel, as the README installs it
"$work/venv/bin/python" -m pip install --quiet "$work"/dist/itermask-*.whl
mkdir "$work/empty" && cd "$work/empty"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline ITERMASK_CACHE="$work/cache"
# a one-job multirun, so that its report (report.html: the report's Jinja2 templates) is written too
"$work/venv/bin/itermask-evaluate" -m debug=smoke logger=csv
report=$(find "$work/empty/multirun" -name report.html | head -n 1)
[ -n "$report" ] && grep -q 'id="first-screen"' "$report" || { echo "check_wheel: no report.html with its first screen" >&2; exit 1; }
"$work/venv/bin/python" - "$work/cache" <<'PY'
import glob
import sys

import itermask

assert "/venv/" in itermask.__file__, f"itermask imported from {itermask.__file__}, not the installed wheel"
(checkpoint,) = glob.glob(f"{sys.argv[1]}/*/model")  # the smoke run's classifier: <cache_dir>/<key>/model
result = itermask.evaluate(
    checkpoint,
    ["A gripping, beautifully shot film.", "Dull, predictable and far too long."],
    labels=["positive", "negative"],
    saliency=["gradient"],
)
table = result.to_pandas("aggregate")
assert len(table) == 4, table  # gradient and random x one-shot and recursive
assert result._repr_html_().count('class="imx"') == 2  # the notebook view: the views' Jinja2 templates shipped
print(f"the installed wheel ({itermask.__file__}) ran the smoke job and the facade example:")
print(table.iloc[:, :5].to_string())
PY
