"""Key policy: what the checkpoint cache (:func:`training_key`) and the results store (:func:`results_key`)
hash, and the :class:`Fingerprint` of the local files that the configs name only by path. Both keys hash each
component's config ``name`` and settings, never its ``_target_`` (:data:`IMPLEMENTATION_KEYS`), so moving a
class keeps the caches valid."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from itermask.storage.cache import config_hash
from itermask.storage.files import file_digest

__all__ = [
    "SCHEMA_VERSION",
    "NOT_IN_KEY",
    "NOT_IN_KEY_AT_DEFAULT",
    "REPAIR_SWITCHES",
    "SOURCE_NOT_IN_KEY_AT_DEFAULT",
    "TRAINER_NOT_IN_CHECKPOINT_KEY",
    "TRAINER_NOT_IN_CHECKPOINT_KEY_AT_DEFAULT",
    "DISABLED_NOT_IN_KEY",
    "IMPLEMENTATION_KEYS",
    "Fingerprint",
    "file_digest",
    "component_settings",
    "results_config",
    "keyed_config",
    "results_key",
    "fixes",
    "trainer_settings",
    "training_payload",
    "training_key",
    "without_local_paths",
    "LOCAL_MODEL",
]

#: Version of the results' layout and statistics, part of every results key and written into ``results.json``
#: (``schema_version``): bump it with every change that alters stored numbers or their layout, so that a re-run
#: recomputes. 2: exact ECE binning, OOD AUROC on raw scores, degenerate detectors under ``missing``, saliency
#: diagnostics. 3: attacked examples whose budget allows no token are skipped (``n_skipped_no_budget``). 4:
#: MaSF's AUROC breaks the ties of its p-values at their floor ``1/(n_cal+1)`` by the distance to the fit samples.
#: 5: the field's other faithfulness measures (symmetric relevance gain, soft comprehensiveness and sufficiency,
#: F-Fidelity, the token-removal reference, the sanity benchmark): results of earlier versions lack them.
SCHEMA_VERSION = 5

#: The data sources' settings that turn bad rows into a logged repair instead of an error
#: (:class:`~itermask.data.sources.DataSource`). They are left out of the checkpoint and result keys: off, the
#: job fails on the rows they would repair, so a finished job's data are the same either way.
REPAIR_SWITCHES = ("drop_missing_labels", "convert_texts", "merge_label_variants")
#: Data source settings added after keys were stored, left out of the checkpoint and result keys while they hold
#: this default (so the jobs that keep it keep their keys): ``{setting: default}``.
SOURCE_NOT_IN_KEY_AT_DEFAULT = {"encoding": "utf-8"}

#: The ``trainer.*`` options (arguments of Lightning's ``Trainer``) that cannot change the fine-tuned weights, left
#: out of the checkpoint key (:func:`trainer_settings`): where and how it logs and reports, ``enable_checkpointing``
#: (false fails with itermask's ``ModelCheckpoint``), the test and predict loops, the devices (their effect on the
#: weights is the process count, ``processes``) and the two options with their own entries (``precision``,
#: ``accumulate_grad_batches``). Every other trainer option, one unknown here included, is keyed when not at its
#: default (:data:`TRAINER_NOT_IN_CHECKPOINT_KEY_AT_DEFAULT`; absent: any value is keyed). The results key hashes
#: the whole ``trainer`` node but for :data:`NOT_IN_KEY`.
TRAINER_NOT_IN_CHECKPOINT_KEY = (
    *("logger", "log_every_n_steps", "enable_progress_bar", "enable_model_summary", "enable_checkpointing"),
    *("default_root_dir", "profiler", "detect_anomaly", "inference_mode"),
    *("limit_test_batches", "limit_predict_batches"),
    *("accelerator", "devices", "strategy", "num_nodes"),
    *("precision", "accumulate_grad_batches"),
)
#: ``{trainer option: the value of conf/trainer/default.yaml}`` left out of the checkpoint key at that value, so
#: the keys of the shipped configs are those from before every trainer option was keyed. ``max_epochs`` is left
#: out at ``model.finetune.max_epochs`` (its interpolated default), which the key holds.
TRAINER_NOT_IN_CHECKPOINT_KEY_AT_DEFAULT: dict[str, Any] = {"num_sanity_val_steps": 0}

#: Dotted config keys that do not change an evaluation's numbers (where to write, how to log, how fast).
NOT_IN_KEY = (
    "output_dir",
    "cache_dir",
    "cache_lock_timeout",
    "job_devices",
    "logger",
    "reuse_results",
    "hparams_search",
    "optimized_metric",
    "data.num_workers",
    "data.eval_batch_size",
    "evaluation.token_budget",
    "train.keep_lightning_checkpoints",
    "train.checkpoint_every_n_steps",
    "trainer.log_every_n_steps",
    "trainer.enable_model_summary",
    "trainer.enable_progress_bar",
    "trainer.enable_checkpointing",
    "saliency.internal_batch_size",
    "masking.chunk_size",
    "attack.candidates.chunk_size",
    "verbose",
    *(f"dataset.source.{switch}" for switch in REPAIR_SWITCHES),
)

#: Dotted config keys left out of the key while they hold the value given here, so that runs at the
#: default share their keys with configs that lack the option.
NOT_IN_KEY_AT_DEFAULT = {
    "train.enabled": True,
    **{f"dataset.source.{name}": default for name, default in SOURCE_NOT_IN_KEY_AT_DEFAULT.items()},
    "trainer.strategy": "auto",
    "trainer.accumulate_grad_batches": 1,
    "threads": None,
    "evaluation.features": "token",
    # the soft measures' draws: at the default the stored results of older schemas are told apart by the
    # schema version (issue 33's bump), so the keys of the shipped configs stay comparable across schemas
    "evaluation.soft_draws": 5,
    # not the default (true) but the behaviour before the option: uniformly shuffled batches keep older keys
    "train.group_by_length": False,
}

#: Dotted config sections left out of the key while their ``enabled`` is false, so that runs without them
#: share their keys with configs that lack the section.
DISABLED_NOT_IN_KEY = ("train.adversarial_augmentation",)

#: Config keys that say how a component is built (its class path), not what it computes: left out of every key.
IMPLEMENTATION_KEYS = ("_target_", "_partial_", "_recursive_", "_convert_", "_args_")

#: The prefix of a local model file's entry in the hashed ``data_files`` mapping (:meth:`Fingerprint.hashed`).
_MODEL_ENTRY = "model:"


class _LocalFiles(Protocol):
    def local_files(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class Fingerprint:
    """The contents of the local files a job reads, which its config names only by path.

    Attributes:
        data_files: SHA-256 of every local file of the data source, by the source's name for it
            (:meth:`~itermask.data.sources.DataSource.local_files`).
        model_files: SHA-256 of every file of a local ``model.pretrained`` directory, by file name."""

    data_files: Mapping[str, str] = field(default_factory=dict)
    model_files: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, source: _LocalFiles, pretrained: str) -> Fingerprint:
        """The fingerprint of a data source's local files and of ``pretrained`` if it is a local directory.

        Raises:
            OSError: if a file cannot be read."""
        data = {name: file_digest(path) for name, path in source.local_files().items()}
        directory = Path(str(pretrained))
        model = {}
        if directory.is_dir():
            model = {p.name: file_digest(p) for p in sorted(directory.iterdir()) if p.is_file()}
        return cls(data, model)

    @classmethod
    def from_hashed(cls, hashed: Mapping[str, str]) -> Fingerprint:
        """The fingerprint whose :meth:`hashed` is ``hashed`` (as a result records it in ``data_files``)."""
        model = {k[len(_MODEL_ENTRY) :]: v for k, v in hashed.items() if k.startswith(_MODEL_ENTRY)}
        return cls({k: v for k, v in hashed.items() if not k.startswith(_MODEL_ENTRY)}, model)

    def hashed(self) -> dict[str, str]:
        """The ``data_files`` entry both keys hash and ``meta.json`` records: the data files by name, then the
        model files as ``model:<file name>``."""
        return {**self.data_files, **{f"{_MODEL_ENTRY}{name}": digest for name, digest in self.model_files.items()}}


def component_settings(node: Any) -> Any:
    """A copy of a resolved config node (plain dicts and lists) without :data:`IMPLEMENTATION_KEYS`, at any
    depth."""
    if isinstance(node, dict):
        return {k: component_settings(v) for k, v in node.items() if k not in IMPLEMENTATION_KEYS}
    if isinstance(node, list):
        return [component_settings(v) for v in node]
    return copy.deepcopy(node)


def _drop_analyses_that_are_off(out: dict) -> None:
    """Remove the analyses that are off by being null (``attack: null``): their node and their name."""
    if isinstance(out.get("analyses"), list):
        off = [name for name in out["analyses"] if name in out and out[name] is None]
        out["analyses"] = [name for name in out["analyses"] if name not in off]
        for name in off:
            out.pop(name)


def results_config(config: dict) -> dict:
    """A copy of the resolved ``config`` (a plain dict) without the keys in :data:`NOT_IN_KEY`, those of
    :data:`NOT_IN_KEY_AT_DEFAULT` at their default, the disabled sections of :data:`DISABLED_NOT_IN_KEY`,
    :data:`IMPLEMENTATION_KEYS`, and the analyses that are off by being null (``attack: null``): their node
    and their name in ``analyses`` (so adding such an analysis keeps the keys of runs without it)."""
    out = component_settings(config)
    _drop_analyses_that_are_off(out)
    trainer = out.get("trainer")
    if isinstance(trainer, dict) and isinstance(trainer.get("devices"), list) and len(trainer["devices"]) == 1:
        trainer["devices"] = 1  # which one device (job_devices) does not change the numbers
    always, disabled = object(), object()
    leave_out = [
        *((dotted, always) for dotted in NOT_IN_KEY),
        *NOT_IN_KEY_AT_DEFAULT.items(),
        *((dotted, disabled) for dotted in DISABLED_NOT_IN_KEY),
    ]
    for dotted, default in leave_out:
        *parents, leaf = dotted.split(".")
        node: Any = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        value = node.get(leaf, default)
        if default is disabled:
            drop = not (isinstance(value, dict) and value.get("enabled", False))
        else:
            drop = default is always or value == default
        if drop:
            node.pop(leaf, None)
    return out


#: What stands for a local model folder's path in both keys (its files' contents are in ``data_files``).
LOCAL_MODEL = "<local folder: see the model: entries of data_files>"


def without_local_paths(config: dict, fingerprint: Fingerprint) -> dict:
    """A copy of ``config`` whose data source no longer names the local files the fingerprint hashed
    (``dataset.source.path``, ``.train``...) and whose ``model.pretrained`` is :data:`LOCAL_MODEL` when it is a
    local folder: both keys hash the files' contents, never how their paths are spelled."""
    out = dict(config)
    source = (config.get("dataset") or {}).get("source")
    if isinstance(source, dict) and fingerprint.data_files:
        out["dataset"] = {
            **config["dataset"],
            "source": {k: v for k, v in source.items() if k not in fingerprint.data_files},
        }
    if isinstance(config.get("model"), dict) and fingerprint.model_files:
        out["model"] = {**config["model"], "pretrained": LOCAL_MODEL}
    return out


def keyed_config(config: dict, fingerprint: Fingerprint | None = None) -> dict:
    """What the results key hashes of a resolved config (a plain dict) besides the schema version:
    :func:`results_config` of it, with (given ``fingerprint``) its local paths replaced by their files' contents
    (:func:`without_local_paths`, ``data_files``). The report compares runs by it, so that a path spelled
    another way (relative or absolute) is the same setting there as in the cache."""
    if fingerprint is not None:
        config = {**without_local_paths(config, fingerprint), "data_files": fingerprint.hashed()}
    return results_config(config)


def results_key(config: dict, fingerprint: Fingerprint | None = None) -> str:
    """The results-store key of a resolved config (a plain dict) and the fingerprint of its local files (without
    ``fingerprint``: the settings only): :func:`~itermask.storage.cache.config_hash` of :data:`SCHEMA_VERSION`,
    :func:`keyed_config` and, for the jobs a fix changed, :func:`fixes`."""
    payload = {"schema_version": SCHEMA_VERSION, "config": keyed_config(config, fingerprint)}
    if changed := fixes(config):
        payload["fixes"] = changed
    return config_hash(payload)


def fixes(config: dict) -> list[str]:
    """The fixes that changed the stored numbers of this job only, among all jobs of its schema: their names
    enter its results key (:func:`results_key`), so that a re-run recomputes it while every other job keeps
    its key (bumping :data:`SCHEMA_VERSION` would recompute them all).

    - ``ffidelity_bf16``: F-Fidelity under ``trainer.precision=bf16-mixed`` (its measures and the sanity
      benchmark's rows of them) fine-tuned its copy on the first step's bfloat16 weights until 5 December 2026
      (:func:`itermask.core.ffidelity.fine_tune_with_removal`)."""
    trainer, ffidelity = config.get("trainer") or {}, config.get("ffidelity")
    bf16 = str(trainer.get("precision", "32-true")).startswith("bf16") if isinstance(trainer, dict) else False
    on = isinstance(ffidelity, dict) and bool(ffidelity.get("enabled", True))
    return ["ffidelity_bf16"] if bf16 and on else []


def trainer_settings(trainer: Mapping[str, Any], defaults: Mapping[str, Any], set_by_stage: tuple = ()) -> dict:
    """The options of a resolved ``trainer`` node (a plain dict) that enter a checkpoint key: all but
    :data:`TRAINER_NOT_IN_CHECKPOINT_KEY`, those of :data:`TRAINER_NOT_IN_CHECKPOINT_KEY_AT_DEFAULT` and
    ``defaults`` (``{option: default}``) at their default, and ``set_by_stage`` (the options a training stage
    sets itself, over the config's), without :data:`IMPLEMENTATION_KEYS`. Empty for the shipped configs."""
    defaults = {**TRAINER_NOT_IN_CHECKPOINT_KEY_AT_DEFAULT, **defaults}
    absent = object()
    return {
        name: component_settings(value)
        for name, value in sorted(trainer.items())
        if name not in (*TRAINER_NOT_IN_CHECKPOINT_KEY, *set_by_stage, *IMPLEMENTATION_KEYS)
        and value != defaults.get(name, absent)
    }


def training_payload(
    config: dict, fingerprint: Fingerprint, seed: int, processes: int = 1, pretrain_key: str | None = None
) -> dict:
    """What the checkpoint key hashes (see :func:`training_key`), from a resolved config (a plain dict)."""
    config = without_local_paths(config, fingerprint)
    train = component_settings(config["train"])
    for augmentation in ("masking_augmentation", "adversarial_augmentation"):
        if not (train.get(augmentation) or {}).get("enabled", False):
            train.pop(augmentation, None)
    if train.get("enabled", True) is True:  # left out at its default (NOT_IN_KEY_AT_DEFAULT)
        train.pop("enabled", None)
    if train.get("group_by_length") is False:  # uniformly shuffled batches, as before the option: older keys
        train.pop("group_by_length", None)  # (NOT_IN_KEY_AT_DEFAULT, for the results key)
    source = component_settings(config["dataset"]["source"])
    for switch in REPAIR_SWITCHES:
        source.pop(switch, None)
    for name, default in SOURCE_NOT_IN_KEY_AT_DEFAULT.items():  # settings left out of the key at their default
        if source.get(name, default) == default:
            source.pop(name, None)
    payload = {
        "model": component_settings(config["model"]),
        "dataset": {"name": config["dataset"]["name"], "source": source},
        "data_files": fingerprint.hashed(),
        "train": train,
        "precision": str(config["trainer"].get("precision", "32-true")),
        "seed": seed,
        # DDP: each process takes a batch of model.finetune.batch_size, so the weights depend on their number
        **({"processes": processes} if processes > 1 else {}),
    }
    # an optimizer step every N batches: the same effective batch as N times the batch size, other weights
    # (dropout draws, padding, the last partial step), so its own key; left out at 1 (older keys unchanged)
    accumulate = config["trainer"].get("accumulate_grad_batches", 1)
    if accumulate != 1:
        payload["accumulate_grad_batches"] = accumulate
    # every other trainer option that can change the weights (clipping, limits, validation schedule...): absent
    # while none is set (older keys unchanged)
    epochs = ((config.get("model") or {}).get("finetune") or {}).get("max_epochs")
    trainer = trainer_settings(config["trainer"], {"max_epochs": epochs})
    if trainer:
        payload["trainer"] = trainer
    if pretrain_key is not None:  # the encoder of continued pretraining (absent otherwise: other keys unchanged)
        payload["pretrained_encoder"] = pretrain_key
    return payload


def training_key(
    config: dict, fingerprint: Fingerprint, seed: int, processes: int = 1, pretrain_key: str | None = None
) -> tuple[str, dict]:
    """The checkpoint-cache key and what it hashes: everything that determines the fine-tuned weights (model,
    dataset source and the contents of its local files, training settings, trainer precision, seed).
    ``train.masking_augmentation`` and ``train.adversarial_augmentation`` count only when enabled,
    ``train.enabled`` only when false, :data:`REPAIR_SWITCHES` never; the DDP ``processes`` and
    ``trainer.accumulate_grad_batches`` only when more than one, the other trainer options by
    :func:`trainer_settings` (under ``trainer``, absent when none is keyed), and ``pretrain_key`` (the key of the
    continued-pretraining stage that made the encoder) when given."""
    payload = training_payload(config, fingerprint, seed, processes, pretrain_key)
    return config_hash(payload), payload
