"""experiment=paper and paper_hub: the grid-union sweeper's exact job lists (a job two grids share runs
once), its errors, and the expected jobs the report reads back from multirun.yaml."""

from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import OmegaConf

from itermask.grids import grid_jobs

ROOT = Path(__file__).resolve().parents[2]
OFF = ["train.masking_augmentation.enabled=False", "train.adversarial_augmentation.enabled=False"]
#: the costly analyses: on in claim 1's jobs, off in the masked and adversarial ones
ANALYSES = ("naopc", "ffidelity", "removal_reference", "sanity")
ON = [f"{a}.enabled=True" for a in ANALYSES]
DISABLED = [f"{a}.enabled=False" for a in ANALYSES]


def _sweeper(experiment: str, overrides=()) -> dict:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("evaluate", overrides=[f"experiment={experiment}", *overrides], return_hydra_config=True)
    return OmegaConf.to_container(cfg.hydra, resolve=False)  # pyright: ignore[reportReturnType]


def test_paper_jobs_are_the_union_of_the_three_grids_each_job_once():
    hydra = _sweeper("paper")
    sweeper = hydra["sweeper"]
    assert sweeper["_target_"] == "hydra_plugins.itermask_sweepers.grid_union.GridUnionSweeper"
    jobs = grid_jobs(sweeper["params"], sweeper["grids"], [])
    claim1 = [
        [f"model={m}", f"saliency={k}", *OFF, f"seed={s}", *ON]
        for m in ("minilm", "minilm_mlm", "minilm_cda")
        for k in ("gradient", "integrated_gradients", "occlusion")
        for s in (0, 1, 2)
    ]
    masked = [
        ["model=minilm", "saliency=gradient", "train.masking_augmentation.enabled=True", OFF[1], f"seed={s}", *DISABLED]
        for s in (0, 1, 2)
    ]
    adversarial = [
        ["model=minilm", "saliency=gradient", OFF[0], "train.adversarial_augmentation.enabled=True", f"seed={s}"]
        + DISABLED
        for s in (0, 1, 2)
    ]
    # claims 2 and 3's standard jobs (minilm, gradient, no augmentation) are claim 1's: launched once
    assert jobs == claim1 + masked + adversarial
    assert len({frozenset(j) for j in jobs}) == len(jobs) == 33
    claims = hydra["callbacks"]["report"]["claims"]
    assert claims["models"] == ["minilm", "minilm_mlm", "minilm_cda"] and claims["accuracy_margin"] == 0.02


def test_command_line_overrides_apply_to_every_grid():
    sweeper = _sweeper("paper")["sweeper"]
    jobs = grid_jobs(sweeper["params"], sweeper["grids"], ["seed=0", "evaluation.n_examples=10"])
    assert len(jobs) == 9 + 1 + 1
    assert all("seed=0" in j and j[-1] == "evaluation.n_examples=10" for j in jobs)


def test_paper_hub_is_the_same_preset_with_the_hub_models():
    hydra = _sweeper("paper_hub")
    paper = _sweeper("paper")
    sweeper = hydra["sweeper"]
    jobs = grid_jobs(sweeper["params"], sweeper["grids"], [])
    models = ("roberta", "fairberta", "bert_large", "bert_cda")
    assert len(jobs) == 4 * 3 * 5 + 5 + 5
    assert [j[0] for j in jobs[:60:15]] == [f"model={m}" for m in models]
    assert jobs[-1] == [
        "model=roberta",
        "saliency=gradient",
        OFF[0],
        "train.adversarial_augmentation.enabled=True",
        "seed=4",
        *DISABLED,
    ]
    # the grids' structure is paper's: only the models and the seeds differ
    assert set(sweeper["grids"]) == set(paper["sweeper"]["grids"])
    assert {k: v for k, v in sweeper["grids"]["claim1"].items() if k != "model"} == {
        k: v for k, v in paper["sweeper"]["grids"]["claim1"].items() if k != "model"
    }
    assert hydra["callbacks"]["report"]["claims"]["models"] == list(models)


def test_every_hub_job_composes():
    sweeper = _sweeper("paper_hub")["sweeper"]
    jobs = grid_jobs(sweeper["params"], sweeper["grids"], ["seed=0"])
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        for job in jobs:
            cfg = compose("evaluate", overrides=["experiment=paper_hub", *job])
            assert cfg.attack.name == "embedding_neighbors" and [str(s.value) for s in cfg.evaluation.schedules] == [
                "one_shot"
            ]
            assert cfg.model.name == job[0].split("=")[1]


def test_a_grid_key_without_a_default_is_refused():
    with pytest.raises(
        HydraException,
        match=r"^hydra.sweeper.grids.extra.dataset is not a key of hydra.sweeper.params \['seed'\]: a grid may only "
        r"set keys that every job sets; if dataset is the setting you mean, add it with its default value",
    ):
        grid_jobs({"seed": "0,1"}, {"extra": {"dataset": "sst2"}}, [])
    # a misspelt key is named with the key it likely means, not blamed on params (issue 36)
    with pytest.raises(
        HydraException,
        match=r"^hydra.sweeper.grids.claim1.saliancy is not a key of hydra.sweeper.params: did you mean saliency\? "
        r"\(keys: \['model', 'saliency', 'seed'\]\)$",
    ):
        grid_jobs({"model": "a", "saliency": "gradient", "seed": "0"}, {"claim1": {"saliancy": "occlusion"}}, [])
    with pytest.raises(HydraException, match="not a list of values"):
        grid_jobs({"lr": "0.1"}, {"g": {"lr": "interval(0.1,1.0)"}}, [])


def test_without_grids_it_is_the_basic_sweep():
    assert grid_jobs({"a": "1,2", "b": "x"}, None, ["c=3"]) == [["a=1", "b=x", "c=3"], ["a=2", "b=x", "c=3"]]


def test_the_report_reads_the_expected_jobs_of_a_grid_union_multirun(tmp_path):
    from itermask.reporting.sweep import _expected_jobs

    hydra = {
        "sweeper": {
            "_target_": "hydra_plugins.itermask_sweepers.grid_union.GridUnionSweeper",
            "params": {"model": "a", "seed": "0,1"},
            "grids": {"one": {"model": "a,b"}, "two": {"model": "a"}},
        },
        "overrides": {"task": ["x=1"]},
    }
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump({"hydra": hydra, "task_name": "evaluate"}))
    expected, _ = _expected_jobs(tmp_path)
    assert expected == [["model=a", "seed=0", "x=1"], ["model=a", "seed=1", "x=1"]] + [
        ["model=b", "seed=0", "x=1"],
        ["model=b", "seed=1", "x=1"],
    ]


def test_paper_evaluates_200_examples_and_the_costliest_measures_on_20_the_hub_preset_on_all():
    def composed(experiment: str) -> dict:
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            return OmegaConf.to_container(compose("evaluate", overrides=[f"experiment={experiment}"]), resolve=False)  # pyright: ignore[reportReturnType]

    paper, hub = composed("paper"), composed("paper_hub")
    assert paper["evaluation"]["n_examples"] == hub["evaluation"]["n_examples"] == 200
    assert [paper[a]["max_examples"] for a in ANALYSES] == [20] * 4
    assert [hub[a]["max_examples"] for a in ANALYSES] == [None] * 4
    assert all(paper[a]["enabled"] is True for a in ANALYSES)


def test_an_interrupted_preset_fine_tuning_resumes_part_way():
    """The preset's fine-tunings write ``last.ckpt`` at least twice within their one epoch (so ``Ctrl-C`` and
    a re-run resume part-way): every step count below the epoch's optimizer steps."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("evaluate", overrides=["experiment=paper"])
    steps = -(-cfg.train.max_train_examples // cfg.model.finetune.batch_size) * cfg.model.finetune.max_epochs
    assert steps == 157
    assert 2 * cfg.train.checkpoint_every_n_steps < steps
