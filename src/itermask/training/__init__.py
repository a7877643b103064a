"""Training: the Lightning fine-tuning module (:mod:`~itermask.training.classifier`), masked and adversarial
fine-tuning (:mod:`~itermask.training.augmentation`), continued MLM pretraining and its corpus
(:mod:`~itermask.training.pretraining`, :mod:`~itermask.training.corpus`), exact resume
(:mod:`~itermask.training.resume`) and the DDP helpers (:mod:`~itermask.training.distributed`)."""
