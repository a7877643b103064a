"""A saved W&B workspace for one sweep (a W&B group), built with ``wandb-workspaces`` (the ``workspaces`` extra).

::

    python -m itermask.wandb_workspace --entity E --project P --group G [--name N] [--dry-run]

creates a workspace of project ``P`` showing the runs of group ``G`` (one multirun of ``evaluate.py``; its group is
the sweep folder's name, or ``logger.group``), grouped by model and saliency method, so the seeds of one pair are
one line with its mean and standard error: the per-step masking curves of the explained method and of random, the
headline AOPC scores and their difference to random, and the Mahalanobis OOD AUROC (its mean over the masking steps,
and per step). The spec is built
offline (:func:`workspace_spec`; ``--dry-run`` prints it as JSON); saving it needs a W&B server and an API key.

The W&B keys the panels read are in :data:`KEYS` (with :data:`STEP`, :data:`METHOD` and :data:`MODEL`): the
explained method and random are logged under fixed names (``curves/explained/<schedule>/<series>``,
``curves/random/...``), the method's name being in the run's config (``saliency.name``), so one panel serves every
method.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, cast

__all__ = ["KEYS", "STEP", "key", "workspace_spec", "main"]

#: the fixed names under which a run logs the explained method and the random explanation
EXPLAINED, RANDOM = "explained", "random"
#: the W&B keys the workspace reads, by role; ``{explanation}`` is :data:`EXPLAINED` or :data:`RANDOM`
KEYS = {
    # per-step history series, against STEP (itermask.tracking.curve_history with prefix "curves")
    "curve": "curves/{explanation}/{schedule}/{series}",
    # per-step OOD statistics (the ood analysis's curves, prefix "ood")
    "ood_curve": "ood/{explanation}/{schedule}/final/auroc_mahalanobis",
    # run summary: that statistic's mean over the masking steps (the ood analysis's summary; no per-step scalars)
    "ood_score": "ood/{explanation}/{schedule}/final/auroc_mahalanobis/mean_over_steps",
    # run-summary scores (itermask.tracking._scalars)
    "score": "{explanation}/{schedule}/{score}",
    "versus_random": "relative_to_random/{schedule}/{score}",
    # the report's summary run (job type "report", not charted here; reporting.render.wandb_summary): a measure's
    # mean, ci_low, ci_high, seed_share, seed_share_ci_low, seed_share_ci_high; explanation: explained, random,
    # explained_minus_random (or another explanation's name)
    "report": "{model}/{dataset}/{saliency}/{masking}/{explanation}/{schedule}/{score}/{statistic}",
}
#: the history's step metric of fraction steps (itermask.tracking.STEP_METRICS["fraction"])
STEP = "masked_fraction"
#: the run-config keys of the saliency method and the model (the runs are grouped by them)
METHOD, MODEL = "saliency.name", "model.name"

SCHEDULES = ("one_shot", "recursive")
#: per-step series charted for each schedule (sufficiency only where the schedule defines it: one-shot)
SERIES = ("comprehensiveness", "sufficiency", "target", "flip_rate")
#: headline scores (AOPC over ERASER's bins)
SCORES = ("comprehensiveness", "sufficiency")
#: the seeds of a group: mean ± standard error
SEEDS: dict[str, Any] = {"groupby_aggfunc": "mean", "groupby_rangefunc": "stderr"}


def key(role: str, **parts: str) -> str:
    """The W&B key of ``role`` (:data:`KEYS`) with its ``parts`` filled in.

    Raises:
        KeyError: for an unknown role or a missing part.
    """
    return KEYS[role].format(**parts)


def _keys(metrics: Sequence[str], schedule: str, quantity: str, aggregate: str | None = None) -> list[str]:
    """The keys of ``metrics`` on ``quantity`` (sufficiency only for the one-shot schedule, which defines it)."""
    from itermask.core.metrics import ScoreKey

    wanted = [m for m in metrics if m != "sufficiency" or schedule == "one_shot"]
    return [str(ScoreKey.of(m, quantity, aggregate)) for m in wanted]  # pyright: ignore[reportArgumentType]


def workspace_spec(
    entity: str,
    project: str,
    group: str,
    name: str | None = None,
    schedules: Sequence[str] = SCHEDULES,
    quantity: str = "probability",
):
    """The workspace of a sweep (see the module docstring), not saved.

    Args:
        entity, project: where the runs are (and the workspace is saved).
        group: the W&B group of the sweep's runs.
        name: the workspace's name (default ``itermask <group>``).
        schedules: the masking schedules charted.
        quantity: ``"probability"`` or ``"logit"``: which target quantity the scores follow
            (``evaluation.quantity``).

    Returns:
        A ``wandb_workspaces.workspaces.Workspace``.

    Raises:
        ImportError: without ``wandb-workspaces`` (``pip install 'itermask[workspaces]'``).
        ValueError: for an unknown quantity or no schedule.
    """
    try:
        import wandb_workspaces.reports.v2  # noqa: F401  (the panels' module, imported by the panel builders)
        import wandb_workspaces.workspaces as ws
        from wandb_workspaces import expr
    except ImportError as error:
        raise ImportError("the W&B workspace needs wandb-workspaces: pip install 'itermask[workspaces]'") from error
    if quantity not in ("probability", "logit"):
        raise ValueError(f"quantity must be 'probability' or 'logit', got {quantity!r}")
    if not schedules:
        raise ValueError("no schedule to chart: give one or more of " + ", ".join(SCHEDULES))
    curves, headline = _curve_panels(schedules, quantity), _headline_panels(schedules, quantity)
    ood = _ood_panels(schedules)
    return ws.Workspace(
        entity=entity,
        project=project,
        name=name or f"itermask {group}",
        sections=[
            ws.Section(name="Masking curves (method vs random, mean ± s.e. over seeds)", panels=curves, is_open=True),
            ws.Section(name="Headline scores by model and method", panels=headline, is_open=True),
            ws.Section(name="OOD AUROC (mean over the masking steps, and per step)", panels=ood, is_open=True),
        ],
        settings=ws.WorkspaceSettings(x_axis=STEP, max_runs=100),
        runset_settings=ws.RunsetSettings(
            filters=expr.And(expr.Metric("Group") == group),
            groupby=[expr.Config(MODEL), expr.Config(METHOD)],
            pinned_columns=[f"config:{MODEL}", f"config:{METHOD}", "config:seed"],
        ),
    )


def _pair(role: str, **parts: str) -> list[Any]:
    """The W&B keys of ``role`` (:func:`key`) for the explained method and for the random explanation."""
    return [key(role, explanation=e, **parts) for e in (EXPLAINED, RANDOM)]


def _curve_panels(schedules: Sequence[str], quantity: str) -> list[Any]:
    """The masking-curves section: per schedule and per-step series (:data:`SERIES` on the target ``quantity``:
    ``"probability"`` or ``"logit"``), a line plot of the method and of random against :data:`STEP`, the seeds of a
    group as mean ± standard error."""
    import wandb_workspaces.reports.v2 as wr

    curves: list[Any] = []
    for schedule in schedules:
        for series in _keys(SERIES, schedule, quantity):
            curves.append(
                wr.LinePlot(
                    title=f"{series} ({schedule}): method vs random",
                    x=STEP,
                    y=_pair("curve", schedule=schedule, series=series),
                    title_x="masked fraction",
                    title_y=series,
                    **SEEDS,
                )
            )
    return curves


def _headline_panels(schedules: Sequence[str], quantity: str) -> list[Any]:
    """The headline-scores section: per schedule and AOPC score (:data:`SCORES` on the target ``quantity``;
    sufficiency for the one-shot schedule only), a bar chart of the method and random and one of the method
    minus random, the seeds of a group as mean ± standard error."""
    import wandb_workspaces.reports.v2 as wr

    headline: list[Any] = []
    for schedule in schedules:
        for score in _keys(SCORES, schedule, quantity, "aopc"):
            headline.append(
                wr.BarPlot(
                    title=f"{score} ({schedule}) by model and method",
                    metrics=_pair("score", schedule=schedule, score=score),
                    **SEEDS,
                )
            )
            headline.append(
                wr.BarPlot(
                    title=f"{score} ({schedule}): method minus random",
                    metrics=[cast(Any, key("versus_random", schedule=schedule, score=score))],
                    **SEEDS,
                )
            )
    return headline


def _ood_panels(schedules: Sequence[str]) -> list[Any]:
    """The OOD section: per schedule, the Mahalanobis OOD AUROC (in [0, 1]) of masked vs clean inputs of the
    method and of random averaged over the masking steps (a bar chart of the run summary), then against
    :data:`STEP` (a line plot of the history), the seeds of a group as mean ± standard error."""
    import wandb_workspaces.reports.v2 as wr

    means = [
        wr.BarPlot(
            title=f"OOD AUROC of masked vs clean inputs ({schedule}), mean over the masking steps",
            metrics=_pair("ood_score", schedule=schedule),
            **SEEDS,
        )
        for schedule in schedules
    ]
    return means + [
        wr.LinePlot(
            title=f"OOD AUROC of masked vs clean inputs ({schedule}, Mahalanobis, final layer)",
            x=STEP,
            y=_pair("ood_curve", schedule=schedule),
            range_y=(0.0, 1.0),
            title_x="masked fraction",
            title_y="AUROC",
            **SEEDS,
        )
        for schedule in schedules
    ]


def spec_json(workspace) -> dict[str, Any]:
    """The workspace as the JSON W&B stores (its view spec), built offline."""
    return json.loads(workspace._to_model().model_dump_json(by_alias=True, exclude_none=True))


def main(argv: list[str] | None = None) -> int:
    """``python -m itermask.wandb_workspace``: build the workspace of a sweep and save it (or print it with
    ``--dry-run``); prints the workspace's URL."""
    parser = argparse.ArgumentParser(
        prog="python -m itermask.wandb_workspace",
        description="Create a saved W&B workspace for a sweep: the per-step curves of the method and of random "
        "(seeds grouped), the headline scores by model and method, and the OOD AUROC per step.",
    )
    parser.add_argument("--entity", required=True, help="W&B entity (user or team)")
    parser.add_argument("--project", required=True, help="W&B project of the runs")
    parser.add_argument("--group", required=True, help="W&B group of the sweep's runs (the sweep folder's name)")
    parser.add_argument("--name", default=None, help="workspace name (default: 'itermask <group>')")
    parser.add_argument("--schedules", nargs="+", default=list(SCHEDULES), help="masking schedules to chart")
    parser.add_argument("--quantity", choices=("probability", "logit"), default="probability")
    parser.add_argument("--dry-run", action="store_true", help="print the workspace spec as JSON, save nothing")
    args = parser.parse_args(argv)
    try:
        workspace = workspace_spec(args.entity, args.project, args.group, args.name, args.schedules, args.quantity)
    except (ImportError, ValueError) as error:
        parser.exit(2, f"error: {error}\n")
    if args.dry_run:
        json.dump(spec_json(workspace), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    saved = workspace.save()
    print(f"saved workspace {saved.name!r}: {saved.url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
