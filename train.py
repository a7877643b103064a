"""Fine-tune a classifier (``conf/train.yaml``; see README.md);
the same command as ``itermask-train`` (:mod:`itermask.commands.train`):
its configs are the package's, ``conf/`` links to them.
Only Hydra and torch-free itermask modules are imported: ``--help`` and a bad setting answer before torch."""

from itermask.commands.train import run

if __name__ == "__main__":
    run()
