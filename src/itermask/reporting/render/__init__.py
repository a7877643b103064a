"""Rendering a :class:`~itermask.reporting.model.Report`: ``report.md``, the self-contained ``report.html`` with its
first screen and examples, the figures, writing all of them (:func:`~itermask.reporting.render.write.write_report`)
and the W&B summary run. The numbers, the curve figures' bands included, are built in :mod:`itermask.reporting`."""
