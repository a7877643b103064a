"""Start-up of the entry points: the config is composed and checked before torch, transformers or Lightning
are imported, and a bad setting prints one message (no traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from itermask.jobs import run_job
from itermask.problems import ConfigError, config_errors, is_config_error
from itermask.storage.failures import FAILURE_FILE
from itermask.validation import SettingsError, composed_problems

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "pytorch_lightning", "lightning", "datasets", "wandb", "umap")


def _env(tmp_path) -> dict:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "ITERMASK_CACHE": str(tmp_path / "cache"),
        "WANDB_MODE": "offline",
        "HF_HUB_OFFLINE": "1",
    }


def _evaluate_py(tmp_path, *overrides: str) -> subprocess.CompletedProcess:
    """``python evaluate.py <overrides>`` in the checkout, its run folder and cache under ``tmp_path``."""
    command = [sys.executable, "evaluate.py", *overrides, f"hydra.run.dir={tmp_path}/run"]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=_env(tmp_path))


def test_composing_and_checking_a_config_imports_no_torch(tmp_path):
    """A fresh interpreter imports what evaluate.py imports, composes conf/evaluate.yaml with a bad and a good
    override and checks it (itermask.validation.check_composed), and never imports torch and co."""
    script = (
        "import sys\n"
        "import itermask, itermask.console, itermask.jobs\n"
        "import hydra_plugins.itermask_sweepers\n"
        "from hydra import compose, initialize_config_dir\n"
        "from itermask.validation import SettingsError, check_composed\n"
        f"with initialize_config_dir(config_dir={str(ROOT / 'conf')!r}, version_base='1.3'):\n"
        "    good = compose(config_name='evaluate', overrides=['output_dir=/tmp/unused'])\n"
        "    bad = compose(config_name='evaluate', overrides=['output_dir=/tmp/unused', 'evaluation.n_examples=0'])\n"
        "from itermask.context import JobContext\n"
        "check_composed(good, JobContext())\n"
        "try:\n"
        "    check_composed(bad, JobContext())\n"
        "except SettingsError as error:\n"
        "    assert 'evaluation.n_examples must be an integer >= 1' in str(error), error\n"
        "else:\n"
        "    raise AssertionError('evaluation.n_examples=0 passed the check')\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "assert not heavy, f'imported {heavy}'\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_env(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]


def test_a_bad_setting_prints_one_message_and_exits_1(tmp_path):
    out = _evaluate_py(tmp_path, "evaluation.n_examples=0", "seed=-1")
    assert out.returncode == 1
    assert "Traceback" not in out.stderr + out.stdout
    assert "bad setting: 2 invalid settings:" in out.stderr
    assert "evaluation.n_examples must be an integer >= 1 or null (the whole split), got 0" in out.stderr
    assert "seed must be an integer in [0, 4294967295] (NumPy's seed range), got -1" in out.stderr
    assert out.stderr.count("evaluation.n_examples must be") == 1  # once, not logged and raised
    # refused by the settings check before Hydra makes the job's folder: nothing written, no Hydra lines
    assert not (tmp_path / "run").exists() and "Error executing job" not in out.stderr


def test_a_config_error_of_a_single_run_is_compact_and_other_errors_are_not(tmp_path):
    from hydra.errors import CompactHydraException

    cfg = OmegaConf.create({"output_dir": str(tmp_path)})

    def bad_settings(_, context):
        with config_errors():
            raise FileNotFoundError("data.path=/nowhere.csv does not exist")

    with pytest.raises(ConfigError, match=r"^bad setting: data.path=/nowhere.csv does not exist$") as caught:
        run_job(bad_settings, cfg)
    assert isinstance(caught.value, CompactHydraException) and isinstance(caught.value.__cause__, FileNotFoundError)
    assert json.loads((tmp_path / FAILURE_FILE).read_text())["type"] == "FileNotFoundError"

    def check(_, context):
        raise SettingsError(["x must be 1"])

    with pytest.raises(ConfigError, match="x must be 1"):  # the check runs first: the task is never imported
        run_job("itermask.no_such_module:task", cfg, check=check)
    with pytest.raises(KeyError):  # a failure of the work itself keeps its type and traceback
        run_job(lambda c, context: {}["missing"], cfg)
    assert not is_config_error(KeyError("x")) and is_config_error(SettingsError(["x"]))


def _ood_config(level: str, plots: bool = True) -> dict:
    return {"analyses": ["ood"], "ood": {"level": level, "plots": {"enabled": plots}}}


def test_ood_full_without_umap_learn_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "umap" else real(name, *a))
    problems = composed_problems(_ood_config("full"))
    assert problems == [
        "ood.level=full draws UMAP figures of the masked inputs with umap-learn, which is not installed: "
        "pip install 'itermask[umap]' (or pip install umap-learn), or set ood.plots.enabled=false, or use ood=final"
    ]
    assert composed_problems(_ood_config("final")) == []
    assert composed_problems(_ood_config("full", plots=False)) == []
    from itermask.analyses import OODAnalysis

    with pytest.raises(ValueError, match=r"itermask\[umap\]"):
        OODAnalysis(level="full")
    OODAnalysis(level="full", plots={"enabled": False})


def test_version_is_printed_without_torch(tmp_path):
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "itermask", "--version"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
    )
    from itermask import __version__

    assert out.returncode == 0 and out.stdout.strip() == f"itermask {__version__}"
    assert " torch\n" not in out.stderr and "| torch" not in out.stderr


def test_a_misspelt_key_gets_the_closest_setting_not_hydras_plus(tmp_path):
    out = _evaluate_py(tmp_path, "evaluation.n_exampels=8", "model=bert")
    # caught before Hydra runs: no "+evaluation.n_exampels" advice, exit 2 as other bad input, nothing written
    assert out.returncode == 2 and "Traceback" not in out.stderr and "+evaluation" not in out.stderr
    assert out.stderr.startswith(
        "hint: evaluation.n_exampels is not a setting of evaluation (did you mean evaluation.n_examples?)\n"
        "error: a setting above does not exist as given"
    )
    assert not list(tmp_path.rglob("*.log"))


def test_unknown_key_hints_read_the_config_of_the_groups_chosen():
    from itermask.console import unknown_key_hints

    conf = ROOT / "conf"
    assert unknown_key_hints(["model.max_lenght=8", "seed=1", "+evaluation.x=1"], conf, "train") == [
        "hint: model.max_lenght is not a setting of model (did you mean model.max_length?)"
    ]
    (hint,) = unknown_key_hints(["evaluation.qqqq=1"], conf, "evaluate")
    assert hint.startswith("hint: evaluation.qqqq is not a setting of evaluation (its settings: ['aopc_bins', ")
    assert unknown_key_hints(["evaluation.n_examples=8", "model.pretrained=x"], conf, "evaluate") == []
    # a setting of an analysis left off: say how to turn it on (Hydra would advise "+naopc.max_examples")
    assert unknown_key_hints(["naopc.max_examples=3"], conf, "evaluate") == [
        "hint: naopc.max_examples is a setting of naopc, which is off: add naopc=on (conf/naopc/on.yaml)"
    ]
    assert unknown_key_hints(["naopc=on", "naopc.max_examples=3"], conf, "evaluate") == []
    assert unknown_key_hints(["a.b=1"], conf, "no_such_config") == []
    # a section the chosen option lacks (Hydra: "Key 'pretrain' is not in struct"; stop 54)
    assert unknown_key_hints(["model=minilm", "model.pretrain.head_steps=5"], conf, "pretrain") == [
        "hint: model.pretrain.head_steps: the model chosen has no model.pretrain section; "
        "the model options that have it: minilm_cda, minilm_mlm"
    ]
    assert unknown_key_hints(["model.pretrain.head_steps=5"], conf, "pretrain") == []

    # a misspelt group or top-level key, bare or dotted (Hydra advised "+saliancy=gradient", which cannot work)
    assert unknown_key_hints(["saliancy=gradient", "seed=1", "evalution.n_examples=5"], conf, "evaluate") == [
        "hint: saliancy is neither a config group nor a setting (did you mean saliency?)",
        "hint: evalution is neither a config group nor a setting (did you mean evaluation?)",
    ]
    assert unknown_key_hints(["seeds=1"], conf, "train") == [
        "hint: seeds is neither a config group nor a setting (did you mean seed?)"
    ]
    assert unknown_key_hints(["experiment=paper", "seed=0,1", "hydra/launcher=joblib"], conf, "evaluate") == []


def test_a_value_the_typed_schema_refuses_is_named_in_one_line():
    """Hydra's own message took four lines and a stack-trace note (stop 54's review: evaluation.fractions=0.1)."""
    from itermask.console import value_problems

    conf = ROOT / "conf"
    assert value_problems(["evaluation.fractions=0.1", "evaluation.schedules=[one_shot]"], conf, "evaluate") == [
        "evaluation.fractions=0.1: a list: write evaluation.fractions=[0.1] (with -m, a sweep of lists: "
        "'evaluation.fractions=[a],[b]')"
    ]
    assert value_problems(["--cfg", "job", "seed=1", "evaluation.n_examples=abc"], conf, "evaluate") == [
        "evaluation.n_examples=abc: Value 'abc' of type 'str' could not be converted to Integer"
    ]
    assert value_problems(["evaluation.fractions="], conf, "evaluate") == [
        "evaluation.fractions=: no value: evaluation.fractions is a list, given in brackets "
        "(evaluation.fractions=[a,b])"
    ]
    assert value_problems(["evaluation.schedules=[oneshot]"], conf, "evaluate") == [
        "evaluation.schedules=[oneshot]: Invalid value 'oneshot', expected one of [one_shot, recursive]"
    ]
    # a list in plain YAML takes a scalar (the settings check judges it), a sweep is checked per job, an unknown
    # key is unknown_key_hints' and a group option that does not exist Hydra's: none is refused here
    for arguments in (
        ["ood.plots.umap_fractions=0.5"],
        ["-m", "evaluation.n_examples=abc,4"],
        ["evaluation.n_exampels=abc"],
        ["saliency=nope", "evaluation.n_examples=3"],
        ["evaluation.n_examples=8", "model=minilm_mlm"],
    ):
        assert value_problems(arguments, conf, "evaluate") == [], arguments


def test_a_group_of_another_command_is_named_with_that_command(monkeypatch):
    from itermask.console import foreign_group_hints

    conf = ROOT / "conf"
    # Hydra advised "+debug=smoke", which adds evaluate.py's evaluation and ood settings to a training run
    assert foreign_group_hints(["seed=1", "debug=smoke", "+x=1", "model=minilm"], conf, "train") == [
        "hint: debug=smoke: python train.py has no debug group; python evaluate.py has it "
        "(python evaluate.py debug=smoke)"
    ]
    assert foreign_group_hints(["saliency=occlusion"], conf, "pretrain") == [
        "hint: saliency=occlusion: python pretrain.py has no saliency group; python evaluate.py has it "
        "(python evaluate.py saliency=occlusion)"
    ]
    assert foreign_group_hints(["debug=smoke", "saliency=occlusion", "model=minilm"], conf, "evaluate") == []
    assert foreign_group_hints(["debug=smoke"], conf, "no_such_config") == []
    # from the installed console scripts (a wheel has no evaluate.py), the commands are named as typed
    monkeypatch.setattr(sys, "argv", ["/venv/bin/itermask-train", "debug=smoke"])
    assert foreign_group_hints(["debug=smoke"], conf, "train") == [
        "hint: debug=smoke: itermask-train has no debug group; itermask-evaluate has it (itermask-evaluate debug=smoke)"
    ]


def test_a_plugin_of_the_sweeps_extra_that_is_not_installed_says_how_to_install_it(monkeypatch):
    import importlib.util

    from itermask.console import missing_plugin_hints

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if "optuna" in name else real(name))
    assert missing_plugin_hints(["hparams_search=optuna", "debug=smoke", "hydra/launcher=joblib"]) == [
        "hint: hparams_search=optuna needs the Hydra plugin hydra-optuna-sweeper, which is not installed: "
        "pip install -e '.[sweeps]' (or pip install 'itermask[sweeps]'; docs/sweeps.md)"
    ]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())  # every plugin installed
    assert missing_plugin_hints(["hparams_search=optuna", "hydra/launcher=submitit_slurm"]) == []


def test_the_resume_hint_repeats_the_command_as_it_was_typed():
    from itermask.formatting import typed_command

    # a checkout's script, under python; arguments a POSIX shell would split or glob are quoted
    argv = ["evaluate.py", "-m", "seed=0,1", "evaluation.fractions=[0.1, 0.5]"]
    assert typed_command(argv) == "python evaluate.py -m seed=0,1 'evaluation.fractions=[0.1, 0.5]'"
    # a console script by its name (``python /venv/bin/itermask-evaluate`` was printed before)
    assert typed_command(["/venv/bin/itermask-evaluate", "-m", "seed=0,1"]) == "itermask-evaluate -m seed=0,1"
    assert typed_command(["../my dir/evaluate.py"]) == "python '../my dir/evaluate.py'"


def test_help_into_a_closed_pipe_stops_quietly(tmp_path):
    """``python evaluate.py --help | head -2`` ended in a BrokenPipeError traceback when head closed the pipe."""
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the first write, as after `head` has its lines
    out = subprocess.run(
        [sys.executable, "evaluate.py", "--help"],
        stdout=writer,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=_env(tmp_path),
    )
    os.close(writer)
    assert (out.returncode, out.stderr) == (141, "")
