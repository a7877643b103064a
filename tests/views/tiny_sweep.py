"""A tiny multirun folder with real per-example files: tiny random BERT classifiers (one per seed) evaluated
on a few short texts, their results and per-example tables written as ``evaluate.py -m`` writes them, for
the report's examples section and the headless-browser test."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch
from results_helpers import make_result, write_sweep

from itermask.analyses.per_example import score_frame, step_frame, token_frame
from itermask.core import metrics
from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.masking import MaskToken
from itermask.core.saliency import InputXGradientSaliency, RandomSaliency
from itermask.core.tokens import TokenBatch
from itermask.storage.per_example import write_per_example

TEXTS = ["the film is good", "a bad , bad movie", "it is not what it is", "good good story"]
LABELS = [1, 0, 0, 1]
FRACTIONS = [0.0, 0.01, 0.5, 1.0]
#: 1 % of these 4-6 token texts rounds to 0 tokens: an empty AOPC bin for every example
BINS = [0.01, 0.5]
#: token strings that the stored tokens of every example get at positions 1, 2, 3 (bad input for HTML)
BAD_TOKENS = ["<script>alert(1)</script>", "שלום", '😀&"q"']
#: constructed final-layer Mahalanobis scores of input_x_gradient's masked inputs per example and step (one
#: per fraction, plus 0.5 in seed 1; random's are half): example 101 scores highest at the last step only,
#: example 102 has the largest mean over the steps (6.25, seed 1 6.75)
OOD_SCORES = {
    100: [1.0, 2.0, 2.0, 2.0],
    101: [1.0, 1.0, 1.0, 20.0],
    102: [1.0, 8.0, 8.0, 8.0],
    103: [1.0, 3.0, 3.0, 3.0],
}


def write_tiny_sweep(
    root: Path,
    tokenizer,
    seeds=(0, 1),
    bad_tokens: bool = False,
    ood: bool = False,
    model_name: str = "m",
    class_names: tuple[str, str] = ("negative", "positive"),
    extra: dict | None = None,
) -> Path:
    """Jobs ``root/0``, ``root/1``, ... (one per seed) with ``results.json`` and ``per_example/`` tables.

    Args:
        root: the sweep folder.
        tokenizer: the tests' WordPiece tokenizer.
        seeds: one job per seed; each seed is a differently initialised tiny BERT (the fine-tuning seed's
            stand-in).
        bad_tokens: overwrite the stored token strings at positions 1-3 of every example with
            :data:`BAD_TOKENS` (markup, right-to-left text, emoji).
        ood: also write ``per_example/ood.parquet`` with the constructed scores of :data:`OOD_SCORES`
            (clean input: 1.0).
        model_name: the model's name (its group's label); class_names: the classes' names (``label_name``).
        extra: keys added to every ``results.json`` (e.g. a failed ``model_check``).
    """
    from conftest import tiny_bert_config
    from transformers import BertForSequenceClassification

    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    ids = torch.arange(len(TEXTS)) + 100
    results = []
    for seed in seeds:
        torch.manual_seed(seed)
        model = BertForSequenceClassification(tiny_bert_config(tokenizer)).eval()
        curves = {}
        for method in (InputXGradientSaliency(output="logit"), RandomSaliency(seed=seed)):
            evaluator = IterativeMaskingEvaluator(method, MaskToken(tokenizer), FRACTIONS, tokenizer.all_special_ids)
            curves[method.name] = evaluator.evaluate(model, batch, torch.tensor(LABELS), ids)
        scores = {
            name: {s: metrics.summarize(c, bins=BINS) for s, c in by_schedule.items()}
            for name, by_schedule in curves.items()
        }
        result = make_result(seed, model=model_name, saliency="input_x_gradient", n_examples=len(TEXTS))
        result.update(extra or {}, label_names=list(class_names))
        result["scores"] = scores
        result["relative_to_random"] = {
            s: metrics.relative_to_random(scores["input_x_gradient"][s], scores["random"][s]) for s in scores["random"]
        }
        result["config"]["evaluation"].update(fractions=FRACTIONS, aopc_bins=BINS, steps="fraction")
        results.append(result)
        parts = [(m, c) for m, by_schedule in curves.items() for c in by_schedule.values()]
        tokens = token_frame(curves, "input_x_gradient", tokenizer)
        assert tokens is not None
        if bad_tokens:
            position = tokens.groupby("example_id").cumcount()
            at = position.between(1, 3)
            tokens.loc[at, "token"] = [BAD_TOKENS[p - 1] for p in position[at]]
        tables = {
            "steps": pd.concat([step_frame(m, c, "probability", BINS) for m, c in parts], ignore_index=True),
            "scores": pd.concat([score_frame(m, c, "probability", BINS) for m, c in parts], ignore_index=True),
            "examples": pd.DataFrame(
                {
                    "example_id": ids.tolist(),
                    "split": "test",
                    "text": TEXTS,
                    "label": LABELS,
                    "label_name": [class_names[v] for v in LABELS],
                }
            ),
            "tokens": tokens,
        }
        if ood:
            frame = pd.DataFrame(tables["steps"][["saliency", "schedule", "example_id", "step", "x", "k"]])
            half = frame.saliency.map({"input_x_gradient": 1.0, "random": 0.5})
            base = [OOD_SCORES[e][s] for e, s in zip(frame.example_id, frame.step)]
            frame["mahalanobis"] = (half * (pd.Series(base, index=frame.index) + 0.5 * seed)).astype("float32")
            frame["clean_mahalanobis"] = pd.Series(1.0, index=frame.index, dtype="float32")
            tables["ood"] = frame
        results[-1]["_tables"] = tables
    write_sweep(root, [{k: v for k, v in r.items() if k != "_tables"} for r in results])
    for i, result in enumerate(results):
        write_per_example(root / str(i), result["_tables"])
    return root
