"""The evaluation runs where its trainer runs: Lightning hands a module back on the CPU after ``test`` (its
strategy's teardown), and the analyses after the masking stage used to run there on a GPU machine."""

from types import SimpleNamespace

import torch

from itermask.engine.run import on_trainer_device


def _context(model, device: str):
    return SimpleNamespace(
        model=model, trainer=SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device(device)))
    )


def test_the_model_is_moved_to_the_trainers_root_device():
    model = torch.nn.Linear(3, 2)
    # "meta" stands in for a GPU on a CPU-only machine: any device other than the model's
    assert on_trainer_device(_context(model, "meta")) == torch.device("meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}


def test_a_model_already_there_is_left_as_it_is():
    model = torch.nn.Linear(3, 2)
    weight = model.weight
    assert on_trainer_device(_context(model, "cpu")) == torch.device("cpu")
    assert model.weight is weight and torch.equal(weight, model.weight)
