"""Studies: research questions answered from a sweep's results, each a package of its own that plugs a
section into the report (:mod:`itermask.reporting.sections`) through one config node with a ``_target_``.
The report engine (:mod:`itermask.reporting`) knows none of them; a study imports the engine.

- :mod:`itermask.studies.robust_infidelity`: the three claims of Crothers, Viktor & Japkowicz, "Robust
  Infidelity" (arXiv 2308.06795), the report's Claims section of ``experiment=paper``.
"""
