"""The evaluation engine, shared by both doors (``evaluate.py`` and :func:`itermask.evaluate`):
:func:`~itermask.engine.prepare.prepare` loads and trains what a plan names, :func:`~itermask.engine.run.run`
evaluates (accuracy, masking curves, analyses) and :func:`~itermask.engine.record.record` writes and logs the
result."""
