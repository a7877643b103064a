"""Draw docs-assets/example_view.html and its Chromium screenshot example_view.png: one masked example of a
an analytic classifier (a weight per word), under Input x
Gradient and the random baseline, with both schedules' masked positions.

    PYTHONPATH=src python docs-assets/make_example_view.py
"""

import collections
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import torch
from transformers import BertTokenizer

from itermask.core.evaluation import IterativeMaskingEvaluator, saliency_attribution
from itermask.core.masking import MaskToken
from itermask.core.saliency import InputXGradientSaliency, RandomSaliency
from itermask.core.tokens import TokenBatch
from itermask.data.files import shipped_source
from itermask.views import views_from_curves

OUT = Path(__file__).parent
sys.path.insert(0, str(OUT.parent / "tests"))
from conftest import AdditiveModel  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tokenizer(tmp: Path) -> BertTokenizer:
    texts = pd.read_csv(shipped_source().files["train"], keep_default_na=False)["text"]
    counts = collections.Counter(w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower()))
    (tmp / "vocab.txt").write_text("\n".join(SPECIALS + [w for w, _ in counts.most_common(2000)]) + "\n")
    return BertTokenizer(vocab=str(tmp / "vocab.txt"))


def main() -> None:
    tmp = Path("/tmp/itermask_example_view")
    tmp.mkdir(exist_ok=True)
    tok = tokenizer(tmp)
    # an analytic classifier (tests/conftest.py's AdditiveModel): p(positive) = sigmoid(sum of word weights)
    weights = {"thoughtful": 1.4, "moving": 1.1, "worth": 0.9, "quiet": 0.3, "slow": -0.9, "wait": -0.5}
    model = AdditiveModel({tok.convert_tokens_to_ids(w): v for w, v in weights.items()}, len(tok)).eval()
    text = "a thoughtful , moving film whose quiet performances make the slow story worth the wait"
    enc = tok([text], return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    grid = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0]
    curves, scores, masks = {}, {}, {}
    for name, method in {"input_x_gradient": InputXGradientSaliency(), "random": RandomSaliency(seed=0)}.items():
        evaluator = IterativeMaskingEvaluator(method, MaskToken(tok), grid, tok.all_special_ids)
        curves[name] = evaluator.evaluate(model, batch, labels=torch.tensor([1]))
        c = curves[name]["recursive"]
        clean = saliency_attribution(method, model, batch, c.target, c.example_ids)
        scores[name] = clean.scores
        maskable = evaluator.maskable(batch)
        # the evaluator's own masks of every schedule (recursive: re-ranked at each step)
        masks[name] = evaluator._schedule_masks(model, batch, maskable, c.k.T, c.target, c.example_ids, clean)
    views = views_from_curves(
        curves, batch, tok, scores, masks=masks, class_names=["negative", "positive"], reasons={0: "example view"}
    )
    page = views.save(OUT / "example_view.html", title="itermask: one masked example")
    chromium = shutil.which("chromium")
    if chromium is None:
        print("no chromium: wrote", page)
        return
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        view = browser.new_page(viewport={"width": 1150, "height": 800})
        view.goto(page.resolve().as_uri())
        view.screenshot(path=str(OUT / "example_view.png"), full_page=True)
        browser.close()
    print("wrote", page, OUT / "example_view.png", file=sys.stderr)


if __name__ == "__main__":
    main()
