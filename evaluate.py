"""Fine-tune (or reuse) a classifier and run the iterative-masking evaluation (``conf/evaluate.yaml``);
the same command as ``itermask-evaluate`` (:mod:`itermask.commands.evaluate`):
its configs are the package's, ``conf/`` links to them.
Only Hydra and torch-free itermask modules are imported: ``--help`` and a bad setting answer before torch."""

from itermask.commands.evaluate import run

if __name__ == "__main__":
    run()
