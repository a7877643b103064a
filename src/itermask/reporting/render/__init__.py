"""Rendering a :class:`~itermask.reporting.model.Report`: ``report.md``
(:mod:`~itermask.reporting.render.markdown_report`), the self-contained ``report.html``
(:mod:`~itermask.reporting.render.html_page`; its first screen, :mod:`~itermask.reporting.render.first_screen`;
its examples, :mod:`~itermask.reporting.render.examples`), the figures (:mod:`~itermask.reporting.render.plots`),
writing all of them (:func:`~itermask.reporting.render.write.write_report`) and the W&B summary run
(:mod:`~itermask.reporting.render.wandb_summary`). The numbers are built in :mod:`itermask.reporting` (the curve
figures' bands too, with its :func:`~itermask.reporting.statistics.seed_interval`)."""
