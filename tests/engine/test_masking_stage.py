"""The masking stage's warning when trainer.limit_test_batches cut the evaluation subset short."""

import logging
from types import SimpleNamespace

from itermask.engine.masking import _warn_test_batch_limit


def _context(n_examples: int, limit, batch_size: int = 64):
    return SimpleNamespace(
        examples=list(range(n_examples)),
        trainer=SimpleNamespace(limit_test_batches=limit),
        data=SimpleNamespace(eval_batch_size=batch_size),
    )


def test_fewer_examples_than_selected_are_named_with_the_test_batch_limit(caplog):
    """debug=smoke evaluation.n_examples=300 scored 256 examples (4 batches of 64) without a word (session 55's
    new-user review); all of them seen (evaluated or skipped for no maskable token) gives no warning."""
    with caplog.at_level(logging.WARNING, logger="itermask.engine.masking"):
        _warn_test_batch_limit(_context(300, 4), seen=256)
        _warn_test_batch_limit(_context(8, 4), seen=8)
    assert [r.getMessage() for r in caplog.records] == [
        "evaluated 256 of the 300 examples selected: trainer.limit_test_batches=4 stops the test loop after that many "
        "batches of data.eval_batch_size=64 (debug=smoke sets it); set trainer.limit_test_batches=1.0 to evaluate "
        "them all"
    ]
