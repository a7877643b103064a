"""Cost of adversarial fine-tuning against standard fine-tuning on the CPU: the same number of training steps
(forward, backward, AdamW step) on the same training batches of the embedded default (packaged MiniLM,
shipped data, ``conf/train.yaml`` settings, batch size 16), with ``train.adversarial_augmentation`` off and on
(at ``batch_share`` 0.5, the default, and 1.0, every batch attacked). The target (issue 14): one epoch of
adversarial fine-tuning costs at most 3x standard fine-tuning. No assertions.

    python bench/adversarial_training_speed.py [--steps 40] [--threads 1] [--shares 0.5 1.0] [--repeats 2]

Each configuration starts from the same pretrained weights (new head, same seed) and runs ``--steps`` steps
of ``SequenceClassifier.training_step`` in a plain loop (no Lightning trainer, so no validation or
checkpointing, which both settings share); configurations alternate ``--repeats`` times so that load changes
on a shared machine hit both. Prints the seconds per step, the ratio to standard and the projected epoch
(157 steps with 2,500 training examples).
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from itermask.engine.prepare import bind, components, load_data
from itermask.settings import training_plan
from itermask.training.classifier import SequenceClassifier
from itermask.training.finetune import seed_everything

ROOT = Path(__file__).resolve().parents[1]


def settings_for(share: float | None):
    """``(plan, resources)`` of the embedded default's fine-tuning, adversarial fine-tuning at ``share`` (or
    off), prepared up to the data (components bound, no fine-tuning)."""
    overrides = ["output_dir=/tmp/unused", "logger=csv"]
    if share is not None:
        overrides += [
            "train.adversarial_augmentation.enabled=true",
            f"train.adversarial_augmentation.batch_share={share}",
        ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        plan = training_plan(compose("train", overrides=overrides))
    resources = bind(plan)
    components(plan, resources)
    return plan, resources


def time_steps(settings, batches: list[dict]) -> tuple[float, dict]:
    """Seconds for one pass of training steps over ``batches``, and the attack's mean logged statistics."""
    plan, resources = settings
    seed_everything(plan.job.seed)
    module = SequenceClassifier(
        plan.model.pretrained,
        num_labels=2,
        adversarial_augmentation=resources.adversarial_fine_tuning,
        **plan.model.optimizer,
    )
    logged: dict[str, list[float]] = {}
    module.log = lambda name, value, **kwargs: logged.setdefault(name, []).append(float(value))  # no trainer here
    optimizer = torch.optim.AdamW(module.parameters(), lr=plan.model.optimizer["learning_rate"])
    start = time.perf_counter()
    for i, batch in enumerate(batches):
        loss = module.training_step(batch, i)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    seconds = time.perf_counter() - start
    return seconds, {k: sum(v) / len(v) for k, v in logged.items() if k != "train_loss"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shares", type=float, nargs="*", default=[0.5, 1.0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    configs = {
        "standard": settings_for(None),
        **{f"adversarial, batch_share {s}": settings_for(s) for s in args.shares},
    }
    plan, resources = configs["standard"]
    load_data(plan, resources)
    data = resources.loaded_data
    batches = list(itertools.islice(iter(data.train_dataloader()), args.steps))
    steps_per_epoch = len(data.train_dataloader())
    times: dict[str, list[float]] = {name: [] for name in configs}
    stats: dict[str, dict] = {}
    for _ in range(args.repeats):
        for name, settings in configs.items():
            seconds, stats[name] = time_steps(settings, batches)
            times[name].append(seconds)
            print(f"  {name}: {seconds:.1f} s for {len(batches)} steps", flush=True)
    base = min(times["standard"]) / len(batches)
    print(
        "\n| fine-tuning | s / step (best of repeats) | x standard | projected epoch (s) "
        "| attacked batches: accepted, flipped, tokens substituted |"
    )
    print("| --- | ---: | ---: | ---: | --- |")
    for name, values in times.items():
        per_step = min(values) / len(batches)
        s = stats.get(name) or {}
        attack = ", ".join(f"{s[k]:.2f}" for k in ("adv_accepted", "adv_flipped", "adv_substituted") if k in s) or "-"
        print(f"| {name} | {per_step:.3f} | {per_step / base:.2f} | {per_step * steps_per_epoch:.0f} | {attack} |")
    print(
        f"\n{len(batches)} steps of batch size {plan.model.batch_size}, {steps_per_epoch} steps per "
        f"epoch, torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
