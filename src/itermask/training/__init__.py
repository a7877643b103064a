"""Fine-tuning and running models: data sources (:mod:`~itermask.training.sources`), tokenized splits
(:mod:`~itermask.training.datamodule`), model loading and the Lightning fine-tuning module
(:mod:`~itermask.training.models`), masked fine-tuning (:mod:`~itermask.training.augmentation`) and the
masking evaluation as a Lightning module (:mod:`~itermask.training.lightning_evaluation`)."""
