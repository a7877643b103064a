"""The notebook facade (itermask.evaluate): the same core as evaluate.py on a tiny local classifier, given as
a module with its tokenizer or as a saved directory, on texts, a CSV file or a datasets.Dataset."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

import itermask
from itermask.conf import CONF_DIR
from itermask.core import metrics
from itermask.core.evaluation import IterativeMaskingEvaluator
from itermask.core.masking import MaskToken
from itermask.core.saliency import GradientSaliency, RandomSaliency
from itermask.core.tokens import TokenBatch
from itermask.validation import SettingsError
from itermask.views import ExampleViews

TEXTS = ["the film is good", "a bad , bad movie", "it is not what it is"]
GRID: dict[str, Any] = {"fractions": [0.0, 0.5, 1.0], "aopc_bins": [0.5]}


def test_evaluate_a_module_runs_the_core_with_the_random_baseline(tiny_bert, tokenizer):
    result = itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, labels=[1, 0, 1], saliency="gradient", **GRID)
    assert result.methods == ["gradient", "random"] and result.n_skipped == 0
    # the core called directly on the same examples (one padded batch) gives the same curves
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    for name, method in {"gradient": GradientSaliency(), "random": RandomSaliency(seed=0)}.items():
        direct = IterativeMaskingEvaluator(method, MaskToken(tokenizer), [0.0, 0.5, 1.0], tokenizer.all_special_ids)
        expected = direct.evaluate(tiny_bert, batch, labels=torch.tensor([1, 0, 1]))
        for schedule in ("one_shot", "recursive"):
            got = result.curves[name][schedule]
            assert got.example_ids.tolist() == [0, 1, 2] and got.labels.tolist() == [1, 0, 1]
            assert torch.equal(got.k, expected[schedule].k)
            torch.testing.assert_close(got.logits, expected[schedule].logits, atol=1e-5, rtol=1e-4)
            summary = metrics.summarize(got, "probability", [0.5])
            assert json.dumps(result.scores[name][schedule]) == json.dumps(summary)  # NaN == NaN here
    key = "aopc_comprehensiveness_prob"
    frame = result.to_pandas("aggregate")
    assert list(zip(frame["saliency"], frame["schedule"])) == [
        ("gradient", "one_shot"),
        ("gradient", "recursive"),
        ("random", "one_shot"),
        ("random", "recursive"),
    ]
    row = frame.iloc[0]
    assert row[f"{key}_minus_random"] == pytest.approx(
        result.scores["gradient"]["one_shot"][key] - result.scores["random"]["one_shot"][key]
    )
    examples = result.to_pandas()
    assert len(examples) == 3 * 2 * 2 and examples["text"].tolist()[:3] == TEXTS
    assert examples["label"].tolist()[:3] == [1, 0, 1]
    clean = result.curves["gradient"]["one_shot"].clean_logits.argmax(dim=-1).tolist()
    assert examples["prediction"].tolist()[:3] == clean
    assert len(result.to_pandas("steps")) == 3 * 2 * 2 * 3
    with pytest.raises(ValueError, match="kind must be"):
        result.to_pandas("per_step")


def test_views_and_the_notebook_html(tiny_bert, tokenizer):
    result = itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, schedules=["one_shot"], **GRID)
    views = result.views([1])
    assert isinstance(views, ExampleViews) and len(views) == 1
    view = views[0]
    assert view.example_id == 1 and view.tokens == ["[CLS]", "a", "bad", ",", "bad", "movie", "[SEP]"]
    assert set(view.methods) == {"gradient", "random"} and view.label is None
    trajectory = view.methods["gradient"].trajectories["one_shot"]
    assert trajectory.masked is not None and [len(m) for m in trajectory.masked] == [0, 3, 5]  # floor(f * 5 + 0.5)
    html = result._repr_html_()
    assert "aopc_comprehensiveness_prob" in html and html.count('class="imx"') == 3  # the first 3 examples
    with pytest.raises(ValueError, match=r"example ids \[7\] were not evaluated"):
        result.views([7])
    # stop 53's new-user review: a raw int() error and a raw NotADirectoryError before
    with pytest.raises(
        ValueError, match=r"^example_ids must be whole numbers \(positions in the given data\), got \['a'\]$"
    ):
        result.views(["a"])
    assert result.views([np.int64(1)]).views[0].example_id == 1
    # one id (it was a bare "TypeError: 'int' object is not iterable": session 55's review); no id at all
    assert [v.example_id for v in result.views(1).views] == [1]
    with pytest.raises(
        ValueError, match=r"^example_ids must be a list of ids \(positions in the given data\), got 1.5"
    ):
        result.views(1.5)
    with pytest.raises(NotADirectoryError, match=r"^cannot write the views page to /dev/null/x.html: Not a directory$"):
        views.save("/dev/null/x.html")
    # a notebook shows a result again and again: the views are built (and saliency computed) once
    calls = []
    result._methods = {name: _Counting(method, calls) for name, method in result._methods.items()}
    assert result._repr_html_() == html and calls == []  # cached: no saliency call
    assert result.views([1]) is views


def test_the_recursive_schedules_masked_positions_reach_the_views(tiny_bert, tokenizer):
    """The facade's curves record the recursive schedule's masked positions: its views show them (not "positions
    not recorded"), though a view re-batches its examples to another padded width."""
    texts = ["a bad , bad movie", "good", "a very good film , and a fun one too"]
    result = itermask.evaluate(tiny_bert, texts, tokenizer=tokenizer, schedules=["recursive"], **GRID)
    view = result.views([1]).views[0]  # one short example: padded narrower than the curves
    trajectory = view.methods["gradient"].trajectories["recursive"]
    assert trajectory.masked is not None and [len(m) for m in trajectory.masked] == [0, 1, 1]
    assert "positions not recorded" not in result.views([0, 1, 2]).html()


class _Counting:
    """A saliency method that counts its calls."""

    def __init__(self, inner, calls):
        self.inner, self.calls = inner, calls

    def __getattr__(self, name):
        self.calls.append(name)
        return getattr(self.inner, name)


def test_a_saved_directory_and_a_csv_file(tiny_bert, tokenizer, tmp_path):
    tiny_bert.config.id2label = {0: "negative", 1: "positive"}
    tiny_bert.config.label2id = {"negative": 0, "positive": 1}
    tiny_bert.save_pretrained(tmp_path / "clf")
    tokenizer.save_pretrained(tmp_path / "clf")
    csv = tmp_path / "data.csv"
    pd.DataFrame({"sentence": TEXTS, "label": ["positive", "negative", "positive"]}).to_csv(csv, index=False)
    result = itermask.evaluate(
        str(tmp_path / "clf"), csv, text_column="sentence", saliency=["gradient", "attention"], target="gold", **GRID
    )
    assert result.methods == ["gradient", "attention", "random"] and result.class_names == ["negative", "positive"]
    assert result.curves["attention"]["one_shot"].target.tolist() == [1, 0, 1]  # gold, read by class name
    with pytest.raises(ValueError, match=r"text_column='text' is not a column of the data: it has \['sentence'"):
        itermask.evaluate(str(tmp_path / "clf"), csv)


def test_a_datasets_dataset_without_labels(tiny_bert, tokenizer):
    import datasets

    data = datasets.Dataset.from_dict({"text": TEXTS})
    result = itermask.evaluate((tiny_bert, tokenizer), data, compare_random=False, steps="count", counts=[0, 1, 2])
    assert result.methods == ["gradient"] and result.relative_to_random == {}
    assert result.curves["gradient"]["one_shot"].labels.tolist() == [-1, -1, -1]
    assert result.scores["gradient"]["one_shot"]["x"] == [0.0, 1.0, 2.0]


def test_bad_input_is_refused_before_any_work(tiny_bert, tokenizer):
    with pytest.raises(ValueError, match="needs its tokenizer"):
        itermask.evaluate(tiny_bert, TEXTS)
    with pytest.raises(SettingsError, match=r"unknown evaluation setting\(s\) \['fraction'\]"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, fraction=[0.5])
    with pytest.raises(ValueError, match="saliency='gradients': no such preset.*did you mean 'gradient'"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, saliency="gradients")  # a bad name: ValueError
    with pytest.raises(ValueError, match="labels"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, labels=[0, 1])
    with pytest.raises(ValueError, match=r"^target='gold' explains each example's gold label: give labels="):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, target="gold")
    # a missing gold label crashed inside Lightning's test loop (session 55's review)
    with pytest.raises(ValueError, match=r"^target='gold' explains each example's gold label, but examples \[0, 2\]"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, target="gold", labels=[None, 1, float("nan")])
    with pytest.raises(ValueError, match=r"labels \['neutral'\] are not classes"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, labels=["neutral", 0, 1])
    with pytest.raises(ValueError, match=r"labels \[5\] are not classes"):  # was "['5']", a number as a string
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, labels=[0, 1, 5])
    with pytest.raises(ValueError, match="single string"):
        itermask.evaluate(tiny_bert, "a good film", tokenizer=tokenizer)
    # the facade's own arguments (a new-user review met torch's and CUDA's raw errors, and a wrong blame)
    with pytest.raises(ValueError, match=r"model must be a torch.nn.Module classifier .* got int 123"):
        itermask.evaluate(123, TEXTS)
    with pytest.raises(ValueError, match=r"batch_size must be a positive integer \(examples per batch\), got 0"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, batch_size=0)
    with pytest.raises(ValueError, match="max_length must be at least 3 tokens"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, max_length=2)
    with pytest.raises(ValueError, match=r"device='gpu' is not a torch device: use 'cpu', 'cuda'"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, device="gpu")
    with pytest.raises(ValueError, match=r"data is None: give a list of texts"):
        itermask.evaluate(tiny_bert, None, tokenizer=tokenizer)
    with pytest.raises(SettingsError) as unknown:
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, fraction=[0.5])
    assert "'fractions'" in str(unknown.value) and "n_examples" not in str(unknown.value)
    with pytest.raises(ValueError, match="n_examples is not an option of itermask.evaluate"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, n_examples=3)
    # the texts given have no second segment: said of them, not of a dataset called "given"
    with pytest.raises(ValueError, match=r"segments=\[1\], but the texts given are single texts .*segments=None"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, segments=[1])
    # stop 54's new-user review: a list of masking names was a bare AssertionError
    with pytest.raises(ValueError, match=r"^masking=\['mask_token'\]: give one strategy, a name of conf/masking"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, masking=["mask_token"])


def test_a_list_setting_of_names_takes_one_name():
    """schedules="one_shot" was read as the letters ['o', 'n', 'e', ...] (stop 54's new-user review), where
    saliency= and measures= take one name."""
    from itermask.settings.presets import evaluation_settings

    one = evaluation_settings({"schedules": "one_shot"}, 0, CONF_DIR)
    assert one.schedules == evaluation_settings({"schedules": ["one_shot"]}, 0, CONF_DIR).schedules == ("one_shot",)
    with pytest.raises(ValueError, match=r"unknown masking schedule\(s\) \[.oneshot.\]"):
        evaluation_settings({"schedules": "oneshot"}, 0, CONF_DIR)


def test_import_itermask_imports_no_torch():
    root = Path(__file__).resolve().parents[2]
    script = (
        "import sys, itermask\n"
        "assert 'torch' not in sys.modules\n"
        "assert callable(itermask.evaluate) and 'itermask.api' in sys.modules\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={"PYTHONPATH": str(root / "src")}
    )
    assert out.returncode == 0, out.stderr[-2000:]


def test_a_callers_own_hydra_session_is_kept(tiny_bert, tokenizer, tmp_path):
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    (tmp_path / "mine.yaml").write_text("x: 1\n")
    initialize_config_dir(config_dir=str(tmp_path), version_base="1.3")
    try:
        mine = GlobalHydra.instance().hydra
        result = itermask.evaluate(tiny_bert, TEXTS[:1], tokenizer=tokenizer, schedules=["one_shot"], **GRID)
        assert result.methods == ["gradient", "random"] and GlobalHydra.instance().hydra is mine
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty: it has no header and no rows"),
        (b"text,label\n\xff\xfe bad bytes,1\n", "is not UTF-8 text (byte 11, line 2, cannot be decoded)"),
        (b'text,label\n"an unclosed quote,1\n', "cannot be read as .csv"),
    ],
)
def test_a_csv_the_facade_cannot_read_is_named_before_any_work(tmp_path, content, message):
    from itermask.data.given import read_examples as _read_examples

    file = tmp_path / "data.csv"
    file.write_bytes(content)
    with pytest.raises(ValueError) as error:
        _read_examples(str(file), None, "text", None, "label")
    assert str(error.value).startswith(f"data={str(file)!r}") and message in str(error.value)


def test_a_named_label_column_the_data_lacks_is_refused_and_a_tab_file_gets_the_delimiter_advice(tmp_path):
    from itermask.data.given import read_examples as _read_examples

    frame = pd.DataFrame({"review": ["good", "bad"]})
    with pytest.raises(ValueError, match=r"label_column='sentiment' is not a column of the data: it has \['review'\]"):
        _read_examples(frame, None, "review", None, "sentiment")
    # the default label column is optional: unlabelled data
    assert _read_examples(frame, None, "review", None, "label").labels is None
    file = tmp_path / "data.csv"
    file.write_text("review\tsentiment\ngood\t1\nbad\t0\n")
    with pytest.raises(ValueError, match=r"looks tab-separated .*: name it \.tsv"):
        _read_examples(str(file), None, "review", None, "sentiment")


def test_a_saliency_that_is_neither_a_name_nor_a_method_is_refused():
    with pytest.raises(ValueError, match=r"saliency=\[42\]: each method is a name of conf/saliency"):
        itermask.evaluate("unused", ["a text"], saliency=[42])


def _containers():
    """Each container a researcher passes, holding TEXTS with the labels 1, 0, 1 (issue 36)."""
    import datasets
    import numpy as np

    columns = {"text": TEXTS, "label": [1, 0, 1]}
    return {
        "list": (TEXTS, [1, 0, 1]),
        "tuple": (tuple(TEXTS), (1, 0, 1)),
        "numpy": (np.array(TEXTS), np.array([1, 0, 1])),
        "series": (pd.Series(TEXTS), pd.Series([1, 0, 1])),
        "tensor labels": (TEXTS, torch.tensor([1, 0, 1])),
        "dict of columns": (columns, None),
        "dict of arrays": ({"text": np.array(TEXTS), "label": np.array([1, 0, 1])}, None),
        "DataFrame": (pd.DataFrame(columns), None),
        "Dataset": (datasets.Dataset.from_dict(columns), None),
    }


@pytest.mark.parametrize("kind", list(_containers()))
def test_every_container_of_texts_and_labels_reads_as_the_same_examples(kind):
    from itermask.data.given import read_examples

    data, labels = _containers()[kind]
    examples = read_examples(data, labels, "text", None, "label")
    assert examples.texts == TEXTS and examples.pairs is None
    # Python ints: a NumPy or tensor label used to be refused as "not a class"
    assert examples.labels == [1, 0, 1] and all(type(label) is int for label in examples.labels)


@pytest.mark.parametrize(
    ("data", "labels", "message"),
    [
        (123, None, r"data must be texts \(a list, tuple, 1-D NumPy array or pandas.Series\), .* got int 123"),
        ({1, 2}, None, r"data must be texts .* got set"),
        ([[1, 2]], None, r"texts \[0\] are empty or not strings"),
        ("folder", None, r"data='.*' is a directory: give a CSV/TSV file"),
        (b"a good film", None, r"data is a single string"),
        ({"text": "a good film"}, None, r"data is a dict whose \['text'\] are single values: give one list per"),
        ({"text": ["a", "b"], "label": [1]}, None, r"data is a dict of columns that pandas cannot read as a table"),
        ("dataset dict", None, r"data is a datasets.DatasetDict of the splits \['test'\]: give one, e.g. data=data"),
        (TEXTS, "positive", r"labels='positive' is a single value: give one label per text"),
        (TEXTS, 1, r"labels=1 is a single value"),
        (TEXTS, [[1], [0], [1]], r"labels must be one label per text \(a flat list or 1-D array\)"),
        (TEXTS, [1, 0], r"2 labels for 3 texts"),
        (TEXTS, {0: 1, 1: 0, 2: 1}, r"labels is a dict: give one label per text, as a list in the texts' order"),
        # a generator was "a single value" (session 56's review)
        (
            TEXTS,
            (x for x in [1, 0, 1]),
            r"labels is a generator: give one label per text as a list in the texts' order",
        ),
        (TEXTS, {1, 0}, r"labels is a set: give one label per text as a list"),
        # True/False were read as the classes 1/0 without a word (stop 54's review)
        (TEXTS, [True, False, True], r"labels are booleans \(True/False\): give class ids or the classifier's"),
        ("numpy bool", None, r"labels are booleans"),
        ({"text": TEXTS, "label": [1, 0, 1]}, [0, 1, 0], r"the data has a label column 'label' and labels= is given"),
    ],
)
def test_data_and_labels_of_no_accepted_kind_are_refused_in_one_line(tmp_path, data, labels, message):
    import datasets
    import numpy as np

    from itermask.data.given import read_examples

    if data == "folder":
        data = str(tmp_path)
    elif data == "numpy bool":
        data, labels = TEXTS, np.array([True, False, True])
    elif data == "dataset dict":
        data = datasets.DatasetDict(test=datasets.Dataset.from_dict({"text": TEXTS}))
    with pytest.raises(ValueError, match=message) as error:
        read_examples(data, labels, "text", None, "label")
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="data must be texts .* of shape \\(1, 3\\)"):
        read_examples(np.array([TEXTS]), None, "text", None, "label")


def test_a_dict_of_columns_with_numpy_labels_is_evaluated_as_its_rows(tiny_bert, tokenizer):
    import numpy as np

    data = {"text": TEXTS, "score": [0.1, 0.2, 0.3]}
    result = itermask.evaluate(tiny_bert, data, tokenizer=tokenizer, labels=np.array([1, 0, 1]), **GRID)
    assert result.texts == TEXTS  # not one example whose text is the word "text"
    assert result.curves["gradient"]["one_shot"].labels.tolist() == [1, 0, 1]


def test_max_length_past_the_position_embeddings_is_refused_before_any_model_work(tiny_bert, tokenizer, monkeypatch):
    from itermask.engine import prepare

    monkeypatch.setattr(prepare, "load_data", lambda *a, **k: pytest.fail("the data were loaded"))
    with pytest.raises(SettingsError, match=r"max_length must be between 3 .* and 128 .*max_position_embeddings=128"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, max_length=129)
    with pytest.raises(ValueError, match=r"max_length must be an integer \(tokens per example\) or None, got '64'"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, max_length="64")
    with pytest.raises(ValueError, match=r"max_length must be an integer .* got 64.0"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, max_length=64.0)


class _SlowTokenizer:
    """A tokenizer that says it is slow (no word ids), otherwise the wrapped one."""

    is_fast = False

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)

    def __call__(self, *args, **kwargs):
        return self._tokenizer(*args, **kwargs)

    def __len__(self):
        return len(self._tokenizer)


def test_word_features_through_the_python_door(tiny_bert, tokenizer):
    result = itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, features="word", schedules=["one_shot"], **GRID)
    curves = result.curves["gradient"]["one_shot"]
    assert curves.word_ids is not None and curves.word_ids[1].tolist()[:7] == [-1, 0, 1, 2, 3, 4, -1]
    assert curves.n_maskable[1].item() == 5  # a bad , bad movie: every word one piece of this vocabulary
    assert result.views([1]).views[0].tokens == ["[CLS]", "a", "bad", ",", "bad", "movie", "[SEP]"]
    with pytest.raises(ValueError, match=r"evaluation.features=word needs a fast tokenizer's word ids, but the "):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=_SlowTokenizer(tokenizer), features="word", **GRID)
    with pytest.raises((ValueError, SettingsError), match=r"features"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, features="piece", **GRID)


def test_measures_add_their_analyses_by_preset_name(tiny_bert, tokenizer):
    result = itermask.evaluate(
        tiny_bert, TEXTS, tokenizer=tokenizer, saliency="gradient", measures=["naopc"], schedules=["one_shot"], **GRID
    )
    section = result.result["naopc"]
    # every example is short enough for exact bounds (naopc.exact_max_features = 10 in conf/naopc/on.yaml)
    assert section["bounds"]["n_exact"] == 3 and section["bounds"]["n_beam"] == 0
    assert set(section["methods"]) == {"gradient", "random"}
    assert 0 <= section["methods"]["gradient"]["one_shot"]["naopc_comprehensiveness_prob"] <= 1 + 1e-5


def test_an_unknown_measure_is_named_with_the_known_ones(tiny_bert, tokenizer):
    with pytest.raises(ValueError, match=r"unknown measure 'naopcc'.*'naopc'"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, measures=["naopcc"], **GRID)
    with pytest.raises(ValueError, match="neither a measure's name nor an Analysis"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, measures=[3], **GRID)


def test_a_classifier_predicting_one_class_is_flagged_in_warnings_and_first_in_the_notebook(tiny_bert, tokenizer):
    from itermask.analyses.model_check import model_check_line

    with torch.no_grad():  # a classifier that predicts class 1 for every text: its bias 4 above class 0's
        tiny_bert.classifier.bias.copy_(torch.tensor([0.0, 4.0]))
    result = itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, schedules=["one_shot"], **GRID)
    line = "WARNING: these faithfulness scores mean nothing: the classifier predicts class "
    assert len(result.warnings) == 1 and result.warnings[0].startswith(line)
    # named as the data name the classes (the model's id2label here), not by its id
    name = result.result["label_names"][1] if "label_names" in result.result else tiny_bert.config.id2label[1]
    assert f"predicts class {name!r} for all 3" in result.warnings[0] and name != "1"
    assert result.warnings == [model_check_line(result.result)]
    assert result.warnings[0].endswith("without fine-tuning here: check that it is trained for these labels")
    html = result._repr_html_()
    assert html.index("these faithfulness scores mean nothing") < html.index("itermask: masking scores")


def test_quiet_lightning_hides_the_datasets_progress_bars_and_restores_them(capfd):
    """The facade runs inside quiet_lightning: a tokenizing map shows no progress bar in a notebook, and the
    user's own setting of the bars is restored after."""
    import datasets
    from datasets.utils import logging as datasets_logging

    from itermask.console import quiet_lightning

    data = datasets.Dataset.from_dict({"text": ["a", "b", "c"]})
    datasets_logging.enable_progress_bar()
    with quiet_lightning():
        data.map(lambda rows: rows, batched=True, desc="tokenizing test")
    assert "tokenizing test" not in capfd.readouterr().err
    assert datasets_logging.is_progress_bar_enabled()  # restored
    datasets_logging.disable_progress_bar()
    with quiet_lightning():
        pass
    assert not datasets_logging.is_progress_bar_enabled()  # a user's "off" stays off
    datasets_logging.enable_progress_bar()


def test_compare_random_must_be_a_boolean(tiny_bert, tokenizer):
    with pytest.raises(ValueError, match="compare_random must be True or False, got 'no'"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, compare_random="no")


def test_a_saliency_method_named_twice_is_refused_as_a_measure_is(tiny_bert, tokenizer):
    with pytest.raises(ValueError, match=r"saliency: \['gradient'\] given more than once"):
        itermask.evaluate(tiny_bert, TEXTS, tokenizer=tokenizer, saliency=["gradient", "gradient"])
