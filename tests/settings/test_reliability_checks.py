"""Checks before any work (issue 25): repeated list items, timeouts, sampling methods' minimum samples,
gradient saliency under inference mode, a cache that cannot be written, DDP's process count and its place in
the checkpoint key, and the flag on a classifier whose faithfulness scores mean nothing."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from conftest import compose_config, settings_problems

from itermask.analyses.base import EvaluatedCurves
from itermask.analyses.model_check import model_check, model_check_line
from itermask.console import summary_lines
from itermask.core.curves import MaskingCurves
from itermask.core.saliency import GradientSaliency, KernelShapSaliency, LimeSaliency, SaliencyError
from itermask.core.tokens import TokenBatch
from itermask.settings import plain
from itermask.storage.cache import CheckpointCache
from itermask.storage.keys import Fingerprint, results_key, training_key
from itermask.training.distributed import distributed_problem, first_of_each, trainer_processes
from itermask.validation import check_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "override, expected",
    [
        ("evaluation.aopc_bins=[0.5,0.5]", "evaluation.aopc_bins lists [0.5] more than once"),
        ("evaluation.fractions=[0.0,0.5,0.5,1.0]", "evaluation.fractions lists [0.5] more than once"),
        ("evaluation.fractions=[0.0,1.0,0.5]", "evaluation.fractions must be in ascending order"),
        ("evaluation.counts=[0,2,1]", "evaluation.counts must be in ascending order"),
        ("evaluation.schedules=[one_shot,one_shot]", "evaluation.schedules lists ['one_shot'] more than once"),
        ("analyses=[ood,ood]", "analyses lists ['ood'] more than once"),
        ("logger.init_timeout=-5", "logger.init_timeout must be a number > 0"),
        ("cache_lock_timeout=0", "cache_lock_timeout must be a number > 0 or null (wait forever)"),
    ],
)
def test_repeated_or_unordered_list_items_and_bad_timeouts_are_refused(override, expected):
    problems = settings_problems(override)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_the_default_config_passes_and_its_keys_do_not_change_with_the_new_options():
    config = plain(compose_config())
    check_config(config)
    assert config["trainer"]["strategy"] == "auto" and config["cache_lock_timeout"] == 86400
    # trainer.strategy at its default and cache_lock_timeout never enter the results key
    other = plain(compose_config("cache_lock_timeout=5"))
    assert results_key(config) == results_key(other)
    assert results_key(config) != results_key(plain(compose_config("trainer=ddp")))


@pytest.mark.parametrize("method, minimum", [(LimeSaliency, 2), (KernelShapSaliency, 3)])
def test_sampling_methods_refuse_fewer_samples_than_they_need(method, minimum):
    with pytest.raises(ValueError, match=f"n_samples must be >= {minimum} for {method.name}, got {minimum - 1}"):
        method(n_samples=minimum - 1)
    assert method(n_samples=minimum).n_samples == minimum


def test_gradient_saliency_under_inference_mode_names_inference_mode(tiny_bert, tokenizer):
    method = GradientSaliency().bind(tokenizer)
    encoding = tokenizer(["a good film"], return_tensors="pt")
    batch = TokenBatch(encoding["input_ids"], encoding["attention_mask"])
    with torch.inference_mode(), pytest.raises(SaliencyError, match=r"called under torch.inference_mode\(\)"):
        method.attribute(tiny_bert, batch, torch.tensor([1]))
    with torch.no_grad():  # fine: the method turns gradients back on
        assert method.attribute(tiny_bert, batch, torch.tensor([1])).shape == batch.input_ids.shape


def test_a_cache_folder_the_os_will_not_make_is_named_with_the_fix(tmp_path):
    # a folder the OS will not make even for root (/proc refuses new entries): named, not a raw FileNotFoundError
    with pytest.raises(
        PermissionError, match=r"the checkpoint cache /proc/itermask-nope/x cannot be created \(.+\); set"
    ):
        CheckpointCache("/proc/itermask-nope/x").writable()
    # and with the other settings, before W&B or the data start (a new-user review: it failed at the first lock);
    # the probe folder leaves nothing behind
    from itermask.console import check_overrides
    from itermask.settings import plain
    from itermask.validation import composed_problems

    assert composed_problems(plain(compose_config("cache_dir=/proc/itermask-nope/x"))) == [
        "cache_dir=/proc/itermask-nope/x cannot be the checkpoint cache: no folder can be made in /proc (No such file "
        "or directory); set cache_dir=<a writable folder> (or the ITERMASK_CACHE environment variable)"
    ]
    for argument in ("hydra.run.dir=/proc/itermask-nope", "hydra.sweep.dir=/sys/itermask-nope/x"):
        with pytest.raises(SystemExit) as exit_:
            check_overrides([argument])
        assert exit_.value.code == 2
    check_overrides([f"hydra.run.dir={tmp_path}/not-made/x"])
    assert os.listdir(tmp_path) == []


def test_an_empty_cache_folder_is_refused_not_made_the_current_folder(monkeypatch):
    # ITERMASK_CACHE= (set to nothing) used to make the current folder the cache: checkpoints in the checkout
    from itermask.settings import plain
    from itermask.validation import composed_problems

    expected = (
        "cache_dir is empty (ITERMASK_CACHE set to nothing?): the checkpoint cache would be the current folder; "
        "set cache_dir=<a writable folder> (or the ITERMASK_CACHE environment variable)"
    )
    monkeypatch.setenv("ITERMASK_CACHE", "")
    assert composed_problems(plain(compose_config())) == [expected]
    monkeypatch.setenv("ITERMASK_CACHE", "/tmp/itermask-cache")
    assert composed_problems(plain(compose_config("cache_dir=' '"))) == [expected]
    assert composed_problems(plain(compose_config())) == []


def test_a_cache_that_is_a_file_or_read_only_is_named_with_the_fix(tmp_path):
    blocked = tmp_path / "cache"
    blocked.write_text("not a folder")
    with pytest.raises(NotADirectoryError, match=f"{blocked} is a file, not a folder; set cache_dir="):
        with CheckpointCache(blocked / "sub").lock("k"):
            pass
    # and with the other settings, before the data or a model is loaded (it used to fail at the checkpoint lock)
    from itermask.settings import plain
    from itermask.validation import composed_problems

    assert composed_problems(plain(compose_config(f"cache_dir={blocked}"))) == [
        f"cache_dir={blocked} cannot be the checkpoint cache: {blocked} is a file, not a folder; set "
        "cache_dir=<a writable folder> (or the ITERMASK_CACHE environment variable)"
    ]
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o555)
    try:
        with pytest.raises(PermissionError, match="is read-only for this user.*chmod u\\+w"):
            with CheckpointCache(read_only).lock("k"):
                pass
    finally:
        read_only.chmod(0o755)


@pytest.mark.parametrize(
    "trainer, processes",
    [
        ({"accelerator": "cpu", "devices": 1, "strategy": "auto"}, 1),
        ({"accelerator": "cpu", "devices": 2, "strategy": "ddp"}, 2),
        ({"accelerator": "cpu", "devices": "2", "strategy": "auto"}, 2),
        ({"accelerator": "gpu", "devices": [0, 3], "strategy": "ddp"}, 2),
        ({"accelerator": "gpu", "devices": "0,1,2", "strategy": "ddp", "num_nodes": 2}, 6),
        ({"accelerator": "cpu", "devices": 4, "strategy": "single_device"}, 1),
    ],
)
def test_trainer_processes(trainer, processes):
    assert trainer_processes(trainer) == processes


def test_ddp_is_refused_in_a_multirun_and_spawning_strategies_always():
    ddp = {"accelerator": "cpu", "devices": 2, "strategy": "ddp"}
    assert distributed_problem(ddp, multirun=False) is None
    assert "cannot do" in (distributed_problem(ddp, multirun=True) or "")
    assert "use trainer=ddp" in (distributed_problem({**ddp, "strategy": "ddp_spawn"}, multirun=False) or "")


def test_the_checkpoint_key_counts_processes_only_when_several():
    config, fingerprint = plain(compose_config()), Fingerprint()
    one, payload = training_key(config, fingerprint, 0)
    assert training_key(config, fingerprint, 0, processes=1)[0] == one and "processes" not in payload
    two, payload = training_key(config, fingerprint, 0, processes=2)
    assert two != one and payload["processes"] == 2


def test_first_of_each_drops_the_examples_a_distributed_sampler_repeated():
    ids = torch.tensor([0, 2, 4, 1, 3, 0])  # 5 examples on 2 ranks: rank 1 repeats example 0
    kept = first_of_each(ids)
    assert kept.tolist() == [0, 3, 1, 4, 2] and ids[kept].tolist() == [0, 1, 2, 3, 4]


def _curves(predicted: list[int]) -> EvaluatedCurves:
    n = len(predicted)
    logits = torch.nn.functional.one_hot(torch.tensor(predicted), 2).float()
    curves = MaskingCurves(
        schedule="one_shot",
        steps="fraction",
        grid=torch.tensor([0.0, 1.0], dtype=torch.float64),
        example_ids=torch.arange(n),
        n_maskable=torch.ones(n, dtype=torch.long),
        k=torch.zeros(n, 2, dtype=torch.long),
        target=torch.tensor(predicted),
        labels=torch.zeros(n, dtype=torch.long),
        clean_logits=logits,
        logits=logits[:, None].repeat(1, 2, 1),
    )
    return EvaluatedCurves.of({"gradient": {"one_shot": curves}})


def test_a_classifier_that_learnt_nothing_is_flagged_in_the_result_and_the_console(caplog):
    from itermask.tracking import _scalars

    result = {"label_names": ["neg", "pos"], "accuracy": {"test": 0.57, "majority_class_test": 0.57}}
    with caplog.at_level("WARNING"):
        check = model_check(result, _curves([1, 1, 1])).result["model_check"]
    assert caplog.records == []  # flagged once per job: by the console summary's last line, not also logged here
    assert check["meaningful"] is False and check["predicted_classes"] == {"pos": 3}
    assert check["problems"] == [
        "the classifier predicts class 'pos' for all 3 evaluated examples",
        "its test accuracy 0.570 is not above the majority class's 0.570 (always predicting the training "
        "split's most frequent class)",
    ]
    line = model_check_line({**result, "model_check": check})
    assert line is not None and line.startswith("WARNING: these faithfulness scores mean nothing: the classifier")
    assert line.endswith(
        "check the fine-tuning (learning rate, epochs, train.max_train_examples) before reading its scores"
    )
    # the advice fits how the classifier came to be: evaluated as given (the facade), or a smoke-sized fine-tuning
    given = model_check_line({**result, "model_check": check, "fine_tuned": False})
    assert given is not None and given.endswith("without fine-tuning here: check that it is trained for these labels")
    smoke = model_check_line({**result, "model_check": check, "config": {"train": {"max_train_examples": 200}}})
    assert smoke is not None and "fine-tuned on at most 200 training examples" in smoke and "debug=smoke" in smoke
    lines = summary_lines({**result, "saliency": {"name": "gradient"}, "model_check": check})
    assert lines[-1] == line and sum("mean nothing" in x for x in lines) == 1  # last, once
    job = {**result, "scores": {}, "n_evaluated": 3, "n_skipped_no_maskable": 0, "model_check": check}
    assert _scalars(job)["model_check/meaningful"] == 0.0  # in the W&B run summary
    good = {"label_names": ["neg", "pos"], "accuracy": {"test": 0.8, "majority_class_test": 0.57}}
    check = model_check(good, _curves([0, 1, 1])).result["model_check"]
    assert check == {"meaningful": True, "problems": [], "predicted_classes": {"neg": 1, "pos": 2}}
    assert (
        _scalars({**good, "scores": {}, "n_evaluated": 3, "n_skipped_no_maskable": 0, "model_check": check})[
            "model_check/meaningful"
        ]
        == 1.0
    )
    assert model_check_line({"model_check": check}) is None and model_check_line({}) is None


def test_a_csv_given_by_a_relative_or_an_absolute_path_has_one_checkpoint_and_one_result(tmp_path, monkeypatch):
    from conftest import training_key_of

    from itermask.settings import build

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "d.csv").write_text("text,label\na,0\nb,1\n")
    monkeypatch.chdir(tmp_path)
    keys = []
    for path in ("data/d.csv", str(tmp_path / "data" / "d.csv"), "./data/../data/d.csv"):
        cfg = compose_config("dataset=csv", f"dataset.source.path={path}")
        config = plain(cfg)
        source = build(config["dataset"]["source"], "dataset.source")
        fingerprint = Fingerprint.of(source, config["model"]["pretrained"])
        keys.append((training_key_of(cfg)[0], results_key(config, fingerprint)))
    assert keys[0] == keys[1] == keys[2]
    # another file's contents still give other keys
    (tmp_path / "data" / "e.csv").write_text("text,label\na,1\nb,0\n")
    cfg = compose_config("dataset=csv", "dataset.source.path=data/e.csv")
    assert training_key_of(cfg)[0] != keys[0][0]


def test_a_jobs_wandb_run_id_follows_its_key_so_a_re_run_resumes_it(monkeypatch):
    import hydra

    from itermask.tracking import runs

    monkeypatch.setattr(runs, "start", lambda make, mode: make())
    monkeypatch.setattr(hydra.utils, "instantiate", lambda spec, **kwargs: spec)

    def started(*overrides: str, key: str | None = "evaluate-0123abcd") -> dict:
        options = runs.logger_options(plain(compose_config("logger=wandb", *overrides)), "run")
        assert options is not None
        return runs.start_logger(options.pop("_target_"), options, key)  # pyright: ignore[reportReturnType]

    spec = started()
    assert spec is not None and spec["id"] == "evaluate-0123abcd" and spec["resume"] == "allow"
    assert started("logger.id=mine")["id"] == "mine"
    assert started(key=None)["id"] is None  # no key: W&B's own id


def test_a_non_ascii_value_without_quotes_is_explained(capsys):
    from itermask.console import check_overrides

    check_overrides(["seed=1", 'dataset.source.path="/data/données.csv"', "-m"])  # quoted: Hydra reads it
    with pytest.raises(SystemExit) as exit_:
        check_overrides(["dataset.source.path=/data/données.csv"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "only inside quotes" in err and "'dataset.source.path=\"/data/données.csv\"'" in err


def test_an_output_folder_that_is_a_file_is_named_before_hydra_makes_it(tmp_path, capsys):
    from itermask.console import check_overrides

    blocked = tmp_path / "file"
    blocked.write_text("x")
    check_overrides([f"hydra.run.dir={tmp_path / 'new'}", f"seed={blocked}"])  # a folder to make; not a folder key
    for override in (f"hydra.run.dir={blocked}", f"hydra.sweep.dir={blocked / 'sub'}"):
        with pytest.raises(SystemExit) as exit_:
            check_overrides([override])
        assert exit_.value.code == 2
        assert capsys.readouterr().err == (
            f"error: {override} cannot be the output folder: {blocked} is a file, not a folder\n"
        )


def test_umap_fractions_must_ascend():
    assert settings_problems("ood.plots.umap_fractions=[0.5,0.1]") == [
        "ood.plots.umap_fractions must be in ascending order, got [0.5, 0.1] (sorted: [0.1, 0.5])"
    ]
    # an item out of range is named alone: "(sorted: [-2, 0])" suggested a list the range check refuses
    assert settings_problems("evaluation.steps=count", "evaluation.counts=[0,-2]") == [
        "every item of evaluation.counts must be an integer >= 0, got [-2]"
    ]


def test_a_setting_the_component_does_not_take_is_named_with_the_close_one():
    from itermask.settings.components import accepted_arguments, build

    node = {"_target_": "itermask.core.saliency.IntegratedGradientsSaliency", "name": "integrated_gradients"}
    with pytest.raises(ValueError) as error:
        build({**node, "n_step": 3}, "saliency")
    message = str(error.value)
    assert message.startswith("saliency.n_step is not a setting of itermask.core.saliency.IntegratedGradientsSaliency")
    assert "did you mean saliency.n_steps?" in message
    # the class's own arguments and, through **kwargs, its bases'
    from itermask.core.saliency import IntegratedGradientsSaliency

    accepted = accepted_arguments(IntegratedGradientsSaliency)
    assert {"n_steps", "token_budget", "baseline", "output", "absolute"} <= set(accepted)
    assert "kwargs" not in accepted and "self" not in accepted
    assert build({**node, "n_steps": 3}, "saliency").n_steps == 3


def test_a_data_sources_name_is_its_argument_not_a_label():
    """``name`` labels a saliency or masking node, but a data source takes it: ``dataset.source.name=bogus`` ran
    on rt_snippets and recorded 'bogus' (the label was dropped before the build), and the hub sources lost
    their GLUE configuration ('sst2')."""
    from itermask.settings.components import build

    shipped = {"_target_": "itermask.data.files.shipped_source", "name": "bogus"}
    with pytest.raises(ValueError, match=r"^dataset\.source\.name must be a dataset shipped with itermask "):
        build(shipped, "dataset.source")
    hub = {"_target_": "itermask.data.sources.HubSource", "path": "nyu-mll/glue", "name": "sst2"}
    assert build({**hub, "text_column": "sentence", "label_column": "label"}, "dataset.source").name == "sst2"
    # a registered component's label is still dropped (passed on, GradientSaliency(name=) would be refused)
    saliency = {"_target_": "itermask.core.saliency.GradientSaliency", "name": "gradient"}
    assert build(saliency, "saliency").name == "gradient"


def test_a_gpu_accelerator_without_a_gpu_is_named_before_any_work(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    problem = distributed_problem({"accelerator": "gpu", "devices": 1, "strategy": "auto"}, multirun=False)
    assert problem is not None and problem.startswith("trainer.accelerator=gpu, but torch")
    assert "sees no GPU: use trainer.accelerator=auto" in problem
    assert distributed_problem({"accelerator": "auto", "devices": 1, "strategy": "auto"}, multirun=False) is None
    # trainer=ddp set the GPU, not the user: the message names the preset and the CPU form (stop 54)
    ddp = distributed_problem(plain(compose_config("trainer=ddp"))["trainer"], multirun=False)
    assert ddp is not None and ddp.startswith("trainer=ddp runs one process per GPU (its trainer.accelerator=gpu)")
    assert ddp.endswith(
        "for DDP over CPU processes add trainer.accelerator=cpu trainer.devices=2, "
        "or install the torch build for your GPU"
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert distributed_problem({"accelerator": "cuda", "devices": 1, "strategy": "auto"}, multirun=False) is None


@pytest.mark.parametrize("limit", [0, -1, 1.5, "abc", True])
def test_a_limit_of_test_batches_that_scores_nothing_or_is_no_number_is_named(limit):
    problem = distributed_problem({"limit_test_batches": limit}, multirun=False)
    assert problem is not None and problem.startswith(f"trainer.limit_test_batches={limit!r} must be")


@pytest.mark.parametrize("limit", [1, 3, 0.25, 1.0])
def test_a_usable_limit_of_test_batches_passes(limit):
    assert distributed_problem({"limit_test_batches": limit}, multirun=False) is None


def test_a_limit_of_zero_test_batches_is_refused_before_any_work():
    from conftest import plan_of

    with pytest.raises(ValueError, match=r"trainer.limit_test_batches=0 must be a whole number of batches >= 1"):
        plan_of(compose_config("+trainer.limit_test_batches=0"))


@pytest.mark.parametrize("override", ["sanity=true", "naopc=False", "+ffidelity=1", "model=0.5"])
def test_a_config_group_given_a_boolean_or_a_number_names_its_choices(override, capsys):
    from itermask.console import check_overrides

    conf = ROOT / "conf"
    check_overrides(["sanity=on", "naopc=none", "seed=true", "model=minilm,bert", "-m"], conf)  # names: Hydra's
    with pytest.raises(SystemExit) as exit_:
        check_overrides([override], conf)
    assert exit_.value.code == 2
    group = override.lstrip("+").split("=")[0]
    choices = sorted(p.stem for p in (conf / group).glob("*.yaml"))
    assert capsys.readouterr().err == f"error: {override}: {group} is a config group; choose one of {choices}\n"


def test_a_config_group_given_null_is_refused_and_told_of_its_none_option(capsys):
    """``saliency=null`` was Hydra's ValueError traceback ("Config group override must be a string or a list. Got
    NoneType"); in a multirun's sweep, a line per job. Another config folder does not make null an option."""
    from itermask.console import check_overrides

    conf = ROOT / "conf"
    for arguments, problem in [
        (["saliency=null"], "saliency=null: null is not an option of saliency"),
        (["-m", "attack=mask,null"], "attack=mask,null: null is not an option of attack (attack=none turns it off)"),
        (
            ["+ffidelity=null", "--config-dir=/x"],
            "+ffidelity=null: null is not an option of ffidelity (ffidelity=none turns it off)",
        ),
    ]:
        with pytest.raises(SystemExit) as exit_:
            check_overrides(arguments, conf)
        choices = sorted(p.stem for p in (conf / problem.split("=")[0].lstrip("+")).glob("*.yaml"))
        assert exit_.value.code == 2 and capsys.readouterr().err == f"error: {problem}; choose one of {choices}\n"


def test_a_sweep_without_multirun_says_to_add_m(capsys, monkeypatch):
    """A new-user review: ``saliency=gradient,occlusion`` without -m was Hydra's five lines, whose first advice
    (``key=[value1,value2]``) does not fit a config group."""
    from itermask.console import check_overrides

    conf = ROOT / "conf"
    for arguments, message in [
        (
            ["saliency=gradient,occlusion", "debug=smoke"],
            "error: saliency=gradient,occlusion is a sweep, one job per value: add -m to run them "
            "(python evaluate.py -m saliency=gradient,occlusion)",
        ),
        (
            ["seed=0,1"],
            "error: seed=0,1 is a sweep, one job per value: add -m to run them (python evaluate.py -m seed=0,1); if "
            "seed is a list setting, write seed=[0,1]",
        ),
    ]:
        with pytest.raises(SystemExit) as exit_:
            check_overrides(arguments, conf, "evaluate")
        assert exit_.value.code == 2 and capsys.readouterr().err == message + "\n"
    monkeypatch.setattr(sys, "argv", ["/venv/bin/itermask-train"])
    with pytest.raises(SystemExit):
        check_overrides(["seed=range(3)"], conf, "train")
    assert "add -m to run them (itermask-train -m seed=range(3))" in capsys.readouterr().err
    for fine in (["-m", "seed=0,1"], ["--multirun", "saliency=gradient,occlusion"], ["evaluation.fractions=[0.1,0.5]"]):
        check_overrides(fine, conf, "evaluate")


def test_a_mistyped_config_group_option_gets_the_closest_one(capsys):
    from itermask.console import check_overrides

    conf = ROOT / "conf"
    for override, close in [
        ("saliency=gradiant", "gradient"),
        ("-m saliency=gradient,integrated_gradiens", "integrated_gradients"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            check_overrides(override.split(), conf)
        assert exit_.value.code == 2
        bad = override.split("=")[1].split(",")[-1]
        assert f"no saliency option '{bad}' (did you mean '{close}'?); choose one of [" in capsys.readouterr().err
    check_overrides(["saliency=mine", "--config-dir=/elsewhere"], conf)  # another folder's option: Hydra's to find
    check_overrides(["saliency=glob(grad*)", "-m"], conf)


def test_hydras_run_modes_together_a_deleted_setting_and_a_foreign_group_get_one_line(capsys):
    """From session 55's new-user review: ``-m ... --cfg job`` was Hydra's ValueError traceback; ``~seed`` a
    KeyError traceback after the job started (and a folder with failed.json); ``pretrain.py debug=smok`` suggested
    ``smoke``, which pretrain.py then refused (its foreign-group hint is left to run without the suggestion)."""
    from itermask.console import check_overrides

    conf = ROOT / "conf"
    for arguments, message in [
        (
            ["-m", "seed=0,1,2", "--cfg", "job"],
            "error: --cfg cannot be combined with -m (Hydra takes one of them): to see one job's config, drop -m and "
            "give one value per swept setting (e.g. seed=0 for seed=0,1,2)\n",
        ),
        (
            ["~seed", "debug=smoke"],
            "error: ~seed: deletes a top-level setting that every job of python evaluate.py reads (it would fail with "
            "a KeyError after the job started): set it instead (seed=<value>; `--cfg job` shows it)\n",
        ),
    ]:
        with pytest.raises(SystemExit) as exit_:
            check_overrides(arguments, conf, "evaluate")
        assert exit_.value.code == 2 and capsys.readouterr().err == message
    with pytest.raises(SystemExit):  # a setting of train.yaml, which evaluate.yaml extends
        check_overrides(["~cache_dir"], conf, "evaluate")
    capsys.readouterr()
    # a group, a nested key, Hydra's own node: deleted as Hydra does; a foreign group's option: the hint's
    check_overrides(
        ["~logger", "~train.adversarial_augmentation.candidates.k", "~hydra.sweeper.grids.claim2"], conf, "evaluate"
    )
    check_overrides(["debug=smok", "--cfg", "job"], conf, "pretrain")
    with pytest.raises(SystemExit):  # evaluate.py has the group: the option is checked
        check_overrides(["debug=smok"], conf, "evaluate")
    assert "did you mean 'smoke'?" in capsys.readouterr().err
