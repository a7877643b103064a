"""Models: loading a tokenizer, a model config or a sequence classifier and matching its classes to the data's
(:mod:`~itermask.models.loading`), and the masked language models of ``masking=mlm_infill``, ``attack=mlm`` and
continued pretraining (:mod:`~itermask.models.mlm`)."""
