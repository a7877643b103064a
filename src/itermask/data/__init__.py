"""Data: the sources of labelled text (:mod:`~itermask.data.sources`, :mod:`~itermask.data.files`), the checks of
their splits (:mod:`~itermask.data.splits`), the tokenized splits and their loaders
(:mod:`~itermask.data.datamodule`, :mod:`~itermask.data.loaders`) and the WordNet lexicon of ``attack=wordnet``
(:mod:`~itermask.data.wordnet`)."""
