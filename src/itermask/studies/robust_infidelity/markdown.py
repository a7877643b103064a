"""The Claims section's Markdown: a heading, then each claim as a question with its verdict, the tables of
the statistics that answer it and its figure."""

from __future__ import annotations

import pandas as pd

from itermask.formatting import md_escape, md_table, number
from itermask.reporting.model import records
from itermask.studies.robust_infidelity.claims import Claims
from itermask.studies.robust_infidelity.runs import select

__all__ = ["claims_markdown", "QUESTIONS"]

QUESTIONS = {
    1: "Do faithfulness scores differ between comparable models (same architecture and accuracy, different "
    "pretraining), beyond the fine-tuning seed?",
    2: "Are masked inputs out of distribution for the fine-tuned model, and does masked fine-tuning change that?",
    3: "Does faithfulness track how efficiently the explanation's ranking attacks the model, and does "
    "adversarial fine-tuning change faithfulness?",
}


def _ci_cell(row, digits: int = 4) -> str:
    return f"{number(row['ci_low'], digits)}, {number(row['ci_high'], digits)}"


def _figure(images: dict, n: int) -> list[str]:
    """Claim ``n``'s figure, if written."""
    return [f"![claim {n}]({images[f'claim::{n}']})", ""] if f"claim::{n}" in images else []


def _differences_lines(claims: Claims, pct: int) -> list[str]:
    if claims.model_differences.empty:
        return []
    intro = (
        f"Between-model differences a - b from every example of every seed ({pct} % Wald interval of a linear "
        "mixed model fitted by REML: model as fixed effect, random intercepts for the example and for the seed "
        "within model; *minus_random*: the method's per-example score minus the seeded random explanation's on "
        "the same example of the same run; *p (Holm)*: adjusted for every comparison between models of "
        "equivalent accuracy, blank for the other pairs; the verdict reads these rows):"
    )
    header = ["a", "b", "method", "measure", "seeds", "examples", "a - b", f"{pct} % CI", "p", "p (Holm)", "note"]
    rows = [
        [r.a, r.b, r.method, r.measure, number(r.n_seeds, 0), number(r.n_examples, 0), number(r.difference)]
        + [_ci_cell(r._asdict()), number(r.p_value, 3), "" if pd.isna(r.p_holm) else number(r.p_holm, 3)]
        + [r.reason if isinstance(r.reason, str) else ""]  # md_table escapes every cell
        for r in records(claims.model_differences)
    ]
    return [intro, "", md_table(header, rows), ""]


def _components_lines(claims: Claims, pct: int) -> list[str]:
    comp = claims.components
    if comp.empty:
        return []
    ok = select(comp, comp.component.notna())
    intro = (
        "Variance components of the per-example score (nested random-effects ANOVA: model, seed within "
        f"model, example, model x example, residual; {pct} % percentile bootstrap resampling seeds within "
        "each model and examples; the models are not resampled):"
    )
    header = ["method", "component", "variance", f"{pct} % CI", "share", f"share {pct} % CI"]
    rows = [
        [r.method, r.component, number(r.estimate, 5), _ci_cell(r._asdict(), 5), number(r.share, 3)]
        + [f"{number(r.share_ci_low, 3)}, {number(r.share_ci_high, 3)}"]
        for r in records(ok)
    ]
    undone = select(comp, comp.component.isna())
    notes = [md_escape(f"- {r.method}: variance components not computed: {r.why}") for r in records(undone)]
    return [intro, "", md_table(header, rows) if len(ok) else "", "", *notes]


def _concordance_lines(claims: Claims) -> list[str]:
    c = claims.concordance
    if not c:
        return []
    return [
        md_escape(
            f"Kendall's W of the ranking of {', '.join(c.get('methods', []))} by their mean {claims.settings.score} "
            f"across the models {', '.join(c.get('models', []))}: W = {number(c.get('w'), 3)} (tie-corrected; "
            f"chi-square p = {number(c.get('p_chi2'), 3)}, permutation p = {number(c.get('p_permutation'), 3)})"
            + (f"; {c['why']}" if c.get("why") else "")
            + ". 1: every model ranks the methods alike."
        ),
        "",
    ]


def _accuracy_lines(claims: Claims) -> list[str]:
    if claims.accuracy.empty:
        return []
    intro = (
        "Test accuracy equivalence (TOST, two one-sided Welch tests at 5 %, margin "
        f"±{claims.settings.accuracy_margin:g}; 90 % interval of the difference):"
    )
    header = ["a", "b", "mean a", "mean b", "a - b", "90 % CI", "TOST p", "equivalent"]
    rows = [
        [r.a, r.b, number(r.mean_a), number(r.mean_b), number(r.difference), _ci_cell(r._asdict())]
        + [number(r.p_value, 3), "yes" if r.equivalent else "no"]
        for r in records(claims.accuracy)
    ]
    return [intro, "", md_table(header, rows), ""]


def _encoder_lines(claims: Claims) -> list[str]:
    """How different the encoders are: CKA per layer and parameter distance per pair, the MLM accuracies."""
    out, pairs, mlm = [], claims.encoder_pairs, claims.mlm_accuracy
    if not pairs.empty:
        layers = len(pairs.cka.iloc[0])
        out += [
            f"How different the encoders are: linear CKA (Kornblith et al. 2019; 1: the same up to rotation and "
            f"scale) of their mean-pooled hidden states on the first {int(pairs.n_texts.iloc[0])} test texts, per "
            "layer (0: the embeddings), and the relative distance of their encoder parameters ||a - b|| / ||b||:",
            "",
            md_table(
                ["a", "b", "||a - b|| / ||b||", *[f"CKA {i}" for i in range(layers)]],
                [[r.a, r.b, number(r.parameter_distance, 4), *[number(c, 4) for c in r.cka]] for r in records(pairs)],
            ),
            "",
        ]
    if not mlm.empty:
        out += [
            "Held-out masked-token accuracy of continued pretraining (fraction of the masked validation tokens "
            "predicted; before: the base encoder frozen, the new MLM head trained alone; after: the joint steps):",
            "",
            md_table(
                ["model", "before", "after", "masked tokens"],
                [[r.model, number(r.before, 4), number(r.after, 4), str(r.heldout_tokens)] for r in records(mlm)],
            ),
            "",
        ]
    return out + [md_escape(f"- {n}") for n in claims.encoder_notes] + ([""] if claims.encoder_notes else [])


def _claim1_lines(claims: Claims, images: dict, pct: int) -> list[str]:
    out = _differences_lines(claims, pct) + _components_lines(claims, pct)
    out += _concordance_lines(claims) + _accuracy_lines(claims) + _encoder_lines(claims)
    return out + _figure(images, 1)


def _claim2_lines(claims: Claims, images: dict, pct: int) -> list[str]:
    if claims.ood_steps.empty:
        return []
    frame = claims.ood_steps.assign(
        cell=[f"{number(r.mean, 3)} [{number(r.ci_low, 3)}, {number(r.ci_high, 3)}]" for r in records(claims.ood_steps)]
    )
    steps = frame.pivot(index="fraction", columns="variant", values="cell")
    intro = (
        f"Mahalanobis OOD AUROC (final layer) of masked vs clean inputs per masking step, mean over seeds "
        f"[{pct} % interval] ({md_escape(claims.ood_summary.get('method'))} ranking; 0.5: indistinguishable):"
    )
    header = ["fraction", *[f"{v} fine-tuning" for v in steps.columns]]
    rows = [[number(f, 3), *row] for f, row in zip(steps.index, steps.to_numpy().tolist())]
    return [intro, "", md_table(header, rows), "", *_figure(images, 2)]


def _claim3_lines(claims: Claims, images: dict, pct: int) -> list[str]:
    if claims.attack_link.empty:
        return _figure(images, 3)
    intro = (
        f"Spearman's rho across methods between the mean {md_escape(claims.settings.score)} and the mean attack "
        f"success rate ({pct} % bootstrap interval over seeds, *degenerate* when the estimate sits on its edge "
        "and the verdict does not use it; exact permutation p):"
    )
    rows = [
        [r.model, ", ".join(r.methods), number(r.rho, 3)]
        + [_ci_cell(r._asdict(), 3) + (" (degenerate)" if getattr(r, "ci_why", None) else "")]
        + [number(r.p_value, 3)]
        for r in records(claims.attack_link)
    ]
    return [intro, "", md_table(["model", "methods", "rho", f"{pct} % CI", "p"], rows), "", *_figure(images, 3)]


def claims_markdown(claims: Claims, images: dict) -> list[str]:
    """The Claims section's Markdown lines; ``images`` maps ``claim::<n>`` to claim ``n``'s figure."""
    pct = int(round(claims.confidence * 100))
    out = [
        "## Claims",
        "",
        "Each claim of Crothers, Viktor & Japkowicz (arXiv 2308.06795) as a question, the statistic that "
        "answers it with its interval, a figure, and what this run supports (the verdict is generated from "
        "the numbers below, not taken from the paper).",
        "",
    ]
    bodies = {1: _claim1_lines, 2: _claim2_lines, 3: _claim3_lines}
    for n in (1, 2, 3):
        out += [
            f"### Claim {n}: {QUESTIONS[n]}",
            "",
            f"**Verdict:** {md_escape(claims.verdicts.get(n, 'not computed'))}",
            "",
        ]
        out += bodies[n](claims, images, pct)
    return out
