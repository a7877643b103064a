"""The evaluation engine: the accuracy and masking stages (:mod:`~itermask.engine.accuracy`,
:mod:`~itermask.engine.masking`) and the masking evaluation as a Lightning module
(:mod:`~itermask.engine.lightning`)."""
