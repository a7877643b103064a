"""What outlives a job: atomic result files and provenance (:mod:`~itermask.storage.files`), the
fine-tuned checkpoint cache (:mod:`~itermask.storage.cache`), the finished-results store
(:mod:`~itermask.storage.store`) and the values every job on one classifier would recompute
(:mod:`~itermask.storage.derived`)."""
