"""What outlives a job: atomic result files and provenance (:mod:`~itermask.storage.files`), the
fine-tuned checkpoint cache (:mod:`~itermask.storage.cache`) and the finished-results store
(:mod:`~itermask.storage.store`)."""
