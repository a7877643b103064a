"""Reporting: aggregate a multirun's ``results.json`` files over seeds and compare models: tables with confidence
intervals, masking curves with a band over seeds, and a Markdown + HTML report in the sweep folder.

Run it on demand with ``python -m itermask.reporting <multirun dir> [--bootstrap] [--permutation] [--wandb]``;
the Hydra callback :class:`itermask.callbacks.ReportCallback` runs it after every ``evaluate.py -m``.

For every (model, dataset, saliency, masking) group of runs that differ only in the seed it computes each
measure's mean with a confidence interval over seeds (:mod:`~itermask.reporting.statistics`), the seed share of
variance of every per-example score (:mod:`~itermask.reporting.seeds`; the first claim of Crothers, Viktor &
Japkowicz, "Robust Infidelity", arXiv 2308.06795, Sec. 4: faithfulness scores vary widely between otherwise
comparable classifiers), the headline (:mod:`~itermask.reporting.headline`: method minus random with a paired
interval and test, and the OOD AUROC of masked inputs, the paper's second claim) and, for two groups that differ
only in the model or a swept setting, the difference of the means with its interval and test.

The numbers are built in this package (loading and grouping in :mod:`~itermask.reporting.sweep`, the aggregation in
:mod:`~itermask.reporting.aggregate`) and rendered by :mod:`itermask.reporting.render`. Report sections
(:mod:`~itermask.reporting.sections`) are parts a study adds through a config node with a ``_target_``; this package
imports no study. Nothing here trains or evaluates: it reads result files, and writes every file atomically."""

from itermask.reporting.aggregate import Report, build_report
from itermask.reporting.cli import main
from itermask.reporting.render.wandb_summary import log_report_to_wandb
from itermask.reporting.render.write import write_report
from itermask.reporting.sections import ReportSection
from itermask.reporting.statistics import compare_samples, seed_interval
from itermask.reporting.sweep import ReportError, Run, Sweep, load_sweep

__all__ = [
    "ReportError",
    "Run",
    "Sweep",
    "Report",
    "ReportSection",
    "seed_interval",
    "compare_samples",
    "load_sweep",
    "build_report",
    "write_report",
    "log_report_to_wandb",
    "main",
]
