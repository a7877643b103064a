"""The evaluation engine, shared by both doors (``evaluate.py`` and :func:`itermask.evaluate`):
:func:`~itermask.engine.prepare.prepare` loads and trains what a plan names (:mod:`~itermask.engine.keys`,
:mod:`~itermask.engine.resources`), :func:`~itermask.engine.run.run` evaluates (the accuracy and masking stages,
:mod:`~itermask.engine.accuracy`, :mod:`~itermask.engine.masking`, the latter through the Lightning module of
:mod:`~itermask.engine.lightning` and the evaluators of :mod:`~itermask.engine.evaluators`; then the analyses), and
:func:`~itermask.engine.record.record` writes and logs the result."""
