"""Reporting: aggregate a multirun's ``results.json`` files over seeds and compare models: tables with confidence
intervals, masking curves with a band over seeds, and a Markdown + HTML report in the sweep folder.

Run it on demand with ``python -m itermask.reporting <multirun dir> [--bootstrap] [--permutation] [--wandb]``;
the Hydra callback :class:`itermask.callbacks.ReportCallback` runs it after every ``evaluate.py -m``.

What it computes, for every (model, dataset, saliency, masking) group of runs that differ only in the seed:

- per measure (test and validation accuracy; every scalar score of ``result["scores"][method][schedule]``;
  every ``result["relative_to_random"][schedule]`` difference) the number of seeds ``n``, the mean, the
  sample standard deviation (``ddof=1``) and a confidence interval for the mean over seeds: Student's
  t-interval ``mean ± t_{(1+c)/2, n-1} · s / sqrt(n)`` by default, or a percentile bootstrap
  (:func:`scipy.stats.bootstrap`);
- from the jobs' per-example tables, every per-example score's *seed share of variance* (a two-way
  random-effects decomposition over seeds x examples, with a bootstrap interval over examples) and a
  Friedman test that the seeds differ, the mean Spearman correlation between seeds, and Kendall's W of
  the ranking of saliency methods across seeds (:mod:`itermask.reporting.seeds`). This quantifies the
  first claim of Crothers, Viktor & Japkowicz, "Robust Infidelity" (arXiv 2308.06795, Sec. 4): faithfulness
  scores vary widely between otherwise comparable classifiers;
- the headline (:mod:`itermask.reporting.headline`): each explanation's score minus the random
  explanation's with a paired interval and test over seeds, and, with OOD statistics, the Mahalanobis
  OOD AUROC of masked inputs (the paper's second claim);
- for two groups that differ only in the model (``model=roberta,fairberta``) or a swept setting: the
  difference of the means (also in units of the within-group seed standard deviation),
  a confidence interval for it and a test whether it is zero: Welch's unequal-variance t-test
  (:func:`scipy.stats.ttest_ind` with ``equal_var=False``; interval ``diff ± t_{df} · sqrt(s_a²/n_a +
  s_b²/n_b)`` with Welch–Satterthwaite ``df``) or a two-sided permutation test of the mean difference
  (:func:`scipy.stats.permutation_test`, interval by bootstrap).

The package is split into what builds the numbers and what renders them:

- numbers: :mod:`~itermask.reporting.sweep` (loading and grouping a multirun's runs),
  :mod:`~itermask.reporting.model` (the :class:`Report` and what a result gives it),
  :mod:`~itermask.reporting.aggregate` (the aggregation), :mod:`~itermask.reporting.statistics`,
  :mod:`~itermask.reporting.intervals` and :mod:`~itermask.reporting.bounds` (intervals and tests),
  :mod:`~itermask.reporting.seeds` and :mod:`~itermask.reporting.headline` (seed sensitivity, headline),
  :mod:`~itermask.reporting.attack_link`, :mod:`~itermask.reporting.examples` (the examples picked),
  :mod:`~itermask.reporting.empty_bins` (AOPC bins that mask nothing);
- rendering, :mod:`itermask.reporting.render`: ``report.md`` (:mod:`~itermask.reporting.render.markdown_report`),
  ``report.html`` (:mod:`~itermask.reporting.render.html_page`, :mod:`~itermask.reporting.render.first_screen`,
  :mod:`~itermask.reporting.render.examples`), the figures (:mod:`~itermask.reporting.render.plots`), writing
  every file (:mod:`~itermask.reporting.render.write`) and the W&B summary run
  (:mod:`~itermask.reporting.render.wandb_summary`);
- report sections (:mod:`~itermask.reporting.sections`): parts a study adds to the report through a config
  node with a ``_target_`` (e.g. the Claims of ``experiment=paper``, in the package of studies); this package
  imports no study.

Nothing here trains or evaluates: it reads result files. Every file is written atomically.
"""

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
