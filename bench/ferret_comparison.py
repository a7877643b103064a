"""Compare itermask's AOPC comprehensiveness/sufficiency with ferret-xai's ``aopc_compr``/``aopc_suff``
on the same examples and the same attribution scores.

ferret needs transformers<5, so it runs in a separate virtual environment. Three stages:

    # 1. in itermask's environment: saliency + our scores, written to a JSON file
    python bench/ferret_comparison.py ours --model-dir <fine-tuned model dir> --out /tmp/cmp/ours.json
    # 2. in a venv with `pip install torch==2.13.0 "transformers<5" ferret-xai`:
    python bench/ferret_comparison.py ferret --model-dir <same dir> --inp /tmp/cmp/ours.json --out /tmp/cmp/ferret.json
    # 3. either environment: the table
    python bench/ferret_comparison.py compare --inp /tmp/cmp/ours.json --ferret /tmp/cmp/ferret.json

Conventions that differ (ferret 0.4.2, ``evaluators/faithfulness_measures.py`` and
``utils_from_soft_to_discrete.py``):
  * ferret removes tokens by default (``remove_tokens=True``) and decodes the remaining ids to text and
    re-tokenizes them; itermask edits ids (mask token by default, or ``delete``) and never re-tokenizes;
  * ferret's grid is 10 %, 20 %, ..., 100 % with k = floor(f * n) and steps with k = 0 skipped; ERASER's
    (itermask's default AOPC) bins are 1, 5, 10, 20, 50 % with k = floor(f * n + 0.5), k = 0 included;
  * ferret keeps only positively scored tokens in the rationale (``only_pos=True``) and drops a threshold
    whose rationale equals the previous one from the mean; itermask ranks all maskable tokens;
  * ferret breaks ties with numpy's argsort (unstable, later positions first); itermask by position.
  * ferret 0.4.2 cannot run with ``only_pos=False``: ``_get_id_tokens_top_k`` compares a numpy array
    with ``[]`` and raises, so only its ``only_pos=True`` settings are compared here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

FERRET_GRID = [round(0.1 * i, 1) for i in range(1, 11)]


def stage_ours(args) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from itermask.core import measures
    from itermask.core.evaluation import IterativeMaskingEvaluator
    from itermask.core.masking import Delete, MaskToken
    from itermask.core.saliency import GradientSaliency
    from itermask.core.tokens import TokenBatch
    from itermask.data.datamodule import TextClassificationDataModule
    from itermask.data.files import shipped_source

    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(args.model_dir).eval()
    dm = TextClassificationDataModule(shipped_source(), tokenizer, max_length=64, eval_batch_size=args.n)
    dm.setup()
    subset = dm.evaluation_subset(args.n, subset_seed=0)
    batch = next(iter(dm._loader(subset, args.n)))
    tokens: TokenBatch = batch["tokens"]
    saliency = GradientSaliency()
    out = {"examples": [], "ours": {}}
    variants = {
        "mask_token, ERASER bins": (
            MaskToken(tokenizer),
            [0.0, 0.01, 0.05, 0.1, 0.2, 0.5],
            [0.01, 0.05, 0.1, 0.2, 0.5],
        ),
        "delete, ERASER bins": (Delete(tokenizer), [0.0, 0.01, 0.05, 0.1, 0.2, 0.5], [0.01, 0.05, 0.1, 0.2, 0.5]),
        "mask_token, ferret grid": (MaskToken(tokenizer), FERRET_GRID, FERRET_GRID),
        "delete, ferret grid": (Delete(tokenizer), FERRET_GRID, FERRET_GRID),
    }
    target = None
    for name, (strategy, fractions, bins) in variants.items():
        evaluator = IterativeMaskingEvaluator(saliency, strategy, fractions, tokenizer.all_special_ids, ["one_shot"])
        curves = evaluator.evaluate(model, tokens, batch["labels"], batch["example_ids"])["one_shot"]
        target = curves.target
        out["ours"][name] = {
            "aopc_compr": measures.aopc(measures.comprehensiveness(curves), curves.fractions, bins).tolist(),
            "aopc_suff": measures.aopc(measures.sufficiency(curves), curves.fractions, bins).tolist(),
        }
    scores = saliency.attribute(model, tokens, target)
    for i in range(len(tokens)):
        length = int(tokens.attention_mask[i].sum())
        ids = tokens.input_ids[i, :length].tolist()
        out["examples"].append(
            {
                "text": subset[i]["text"],
                "tokens": tokenizer.convert_ids_to_tokens(ids),
                "scores": scores[i, :length].tolist(),
                "target": int(target[i]),
            }
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out))


def stage_ferret(args) -> None:
    import numpy as np
    from ferret.evaluators.faithfulness_measures import AOPC_Comprehensiveness_Evaluation, AOPC_Sufficiency_Evaluation
    from ferret.explainers.explanation import Explanation
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(args.model_dir).eval()
    data = json.loads(Path(args.inp).read_text())
    compr, suff = AOPC_Comprehensiveness_Evaluation(model, tokenizer), AOPC_Sufficiency_Evaluation(model, tokenizer)
    results = {}
    settings = {
        "ferret default (delete + re-tokenize, only_pos)": {},
        "ferret, mask token": {"removal_args": {"remove_tokens": False}},
    }
    for name, kwargs in settings.items():
        rows = {"aopc_compr": [], "aopc_suff": []}
        for ex in data["examples"]:
            explanation = Explanation(ex["text"], ex["tokens"], np.array(ex["scores"]), "gradient", ex["target"])
            rows["aopc_compr"].append(float(compr.compute_evaluation(explanation, ex["target"], **kwargs).score))
            rows["aopc_suff"].append(float(suff.compute_evaluation(explanation, ex["target"], **kwargs).score))
        results[name] = rows
    Path(args.out).write_text(json.dumps(results))


def stage_compare(args) -> None:
    import statistics

    ours = json.loads(Path(args.inp).read_text())["ours"]
    ferret = json.loads(Path(args.ferret).read_text())
    print(f"{'implementation / convention':55s} {'AOPC compr':>11s} {'AOPC suff':>10s}")
    for name, rows in [*ours.items(), *ferret.items()]:
        c, s = [float(v) for v in rows["aopc_compr"]], [float(v) for v in rows["aopc_suff"]]
        print(f"{name:55s} {statistics.mean(c):11.4f} {statistics.mean(s):10.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=["ours", "ferret", "compare"])
    parser.add_argument("--model-dir")
    parser.add_argument("--inp")
    parser.add_argument("--ferret")
    parser.add_argument("--out")
    parser.add_argument("--n", type=int, default=50)
    args = parser.parse_args()
    {"ours": stage_ours, "ferret": stage_ferret, "compare": stage_compare}[args.stage](args)


if __name__ == "__main__":
    main()
