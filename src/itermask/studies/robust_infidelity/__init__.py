"""The study "Robust Infidelity": the report's "Claims" section (``experiment=paper``), the three claims of
Crothers, Viktor & Japkowicz, "Robust Infidelity" (arXiv 2308.06795), each as a question, the statistic that
answers it with a confidence interval, a figure, and a verdict sentence generated from the numbers (never
from the paper), with its conditions (models, dataset, seeds, examples).

1. *Do faithfulness scores differ between comparable models?* Standard fine-tuning of each model
   (``claims.models``, e.g. MiniLM, MiniLM with continued MLM pretraining, and with counterfactual
   augmentation): for every saliency method and ``random`` the between-model difference of its score and of
   method - random from a linear mixed model over every example of every seed; the nested variance
   components model / seed within model / example; Kendall's W of the methods' ranking across models; and the
   models' test-accuracy equivalence within a margin (TOST; all in
   :mod:`~itermask.studies.robust_infidelity.statistics`). Supported when, between two models of equivalent
   accuracy, some method's score (or method - random) differs after Holm's correction for every comparison
   made at equivalent accuracy; in part when some intervals exclude 0 but none survives the correction. Not
   supported when no pair's accuracy is equivalent and every pair's interval lies outside the margin; with no
   pair shown equivalent otherwise, it cannot answer and says the margin the TOST could show at 80 % power
   (:func:`~itermask.studies.robust_infidelity.statistics.equivalence_margin`). The verdict says whether the
   differences are in the raw scores only (the random explanation's included: the models' sensitivity to
   masking) or in method - random, and ends with every pair's TOST p and, for a p within a factor 2 of 0.05,
   the word the verdict would have were that pair decided the other way (when it differs).
2. *Are masked inputs out of distribution, and does masked fine-tuning change that?* The base model with standard vs
   masked fine-tuning: the Mahalanobis OOD AUROC (final layer) per masking step; supported when the standard model's
   mean AUROC over the masked steps is above 0.5 (interval) and masked fine-tuning lowers it (interval of the
   difference above 0).
3. *Does faithfulness track attack efficiency, and does adversarial fine-tuning change faithfulness?* Spearman's rho
   across the methods between the score and the attack success rate (per model, with a bootstrap interval over seeds
   and the exact permutation p-value), and standard vs adversarial fine-tuning of the base model: the difference of
   attack success rate and of the score (the paper reports no consistent change of faithfulness). A rho interval
   with the estimate on its edge (few seeds: few distinct bootstrap resamples) is marked degenerate and unused.

Every verdict's direction words follow its statistic's sign and interval, and it states the smallest effect its
design detects at 80 % power (:func:`~itermask.studies.robust_infidelity.statistics.detectable_effect`; a
difference of two means over seeds on Welch's standard error and degrees of freedom, as its test and interval).

The runs are read from the report's sweep; a run's *variant* (standard, masked, adversarial) comes from its
results config (``train.masking_augmentation.enabled``, ``train.adversarial_augmentation.enabled``), so
grouping labels do not matter. Settings: ``hydra.callbacks.report.claims`` (:class:`ClaimSettings`), whose
``_target_`` names :class:`RobustInfidelity`, the report section (:mod:`itermask.reporting.sections`) the
report finds there, or in the sweep's ``multirun.yaml`` when the report is built from the command line.

After the claims, :class:`MeasureTrust` (``hydra.callbacks.report.trust``, :mod:`~itermask.studies.
robust_infidelity.trust`) asks the paper's open question of every faithfulness measure on the same runs: which
measure holds up across comparable models, seeds and explanations degraded by known amounts?
"""

from itermask.studies.robust_infidelity.claims import Claims
from itermask.studies.robust_infidelity.compute import compute_claims
from itermask.studies.robust_infidelity.runs import variant
from itermask.studies.robust_infidelity.section import RobustInfidelity
from itermask.studies.robust_infidelity.settings import ClaimSettings
from itermask.studies.robust_infidelity.trust import MeasureTrust

__all__ = ["RobustInfidelity", "MeasureTrust", "ClaimSettings", "Claims", "compute_claims", "variant"]
