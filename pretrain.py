"""Continued masked-language-model pretraining of ``model`` alone (``conf/pretrain.yaml``, docs/pretraining.md);
the same command as ``itermask-pretrain`` (:mod:`itermask.commands.pretrain`):
its configs are the package's, ``conf/`` links to them.
Only Hydra and torch-free itermask modules are imported: ``--help`` and a bad setting answer before torch."""

from itermask.commands.pretrain import run

if __name__ == "__main__":
    run()
