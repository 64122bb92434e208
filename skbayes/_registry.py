"""The one list of skbayes's estimators, read by the package, its tests, benchmarks and docs.

Adding an estimator: its public module (the class), its family (``_families/``), its posterior
(``posteriors/``), its docs page, one :class:`EstimatorInfo` line in :data:`ESTIMATORS` below and
the names in ``skbayes/__init__.py``'s imports and ``__all__`` (see docs/adding_a_method.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from sklearn.base import BaseEstimator

from .bbb import BBBClassifier, BBBRegressor
from .dropout import MCDropoutClassifier, MCDropoutRegressor
from .kfac import NoisyEKFACClassifier, NoisyEKFACRegressor, NoisyKFACClassifier, NoisyKFACRegressor
from .linear_model import BayesianLinearRegression
from .slang import SLANGClassifier, SLANGRegressor
from .vadam import VadamClassifier, VadamRegressor
from .vogn import VOGNClassifier, VOGNRegressor

__all__ = ["EstimatorInfo", "ESTIMATORS", "all_estimators"]


@dataclass(frozen=True)
class EstimatorInfo:
    """What the tests, benchmarks and docs need to know of one estimator.

    Parameters
    ----------
    estimator : type
        The estimator class.
    method : str
        Short name of the method, shared by its regressor and classifier (the benchmarks'
        ``--methods`` names): ``'slang'``, ``'vogn'``, ``'vadam'``, ``'bbb'``, ``'mcdropout'``,
        ``'kfac'``, ``'ekfac'``, ``'blr'``.
    task : {'regressor', 'classifier'}
    network : bool
        Whether it is a network estimator (``hidden_layer_sizes``, ``module``, ...).
    gaussian : bool
        Whether its posterior is a Gaussian over the weights (every method but MC dropout).
    docs : str
        Its page in docs/.
    """

    estimator: type[BaseEstimator]
    method: str
    task: str
    network: bool
    gaussian: bool
    docs: str

    @property
    def name(self) -> str:
        """The class name, e.g. ``'SLANGRegressor'``."""
        return self.estimator.__name__


def _pair(
    reg: type[BaseEstimator], clf: type[BaseEstimator], method: str, docs: str, gaussian: bool = True
) -> tuple[EstimatorInfo, EstimatorInfo]:
    return (
        EstimatorInfo(reg, method, "regressor", True, gaussian, docs),
        EstimatorInfo(clf, method, "classifier", True, gaussian, docs),
    )


#: Every public estimator, regressor before classifier, in the order of the README's table.
ESTIMATORS: tuple[EstimatorInfo, ...] = (
    *_pair(SLANGRegressor, SLANGClassifier, "slang", "slang.md"),
    *_pair(NoisyKFACRegressor, NoisyKFACClassifier, "kfac", "kfac.md"),
    *_pair(NoisyEKFACRegressor, NoisyEKFACClassifier, "ekfac", "kfac.md"),
    *_pair(VOGNRegressor, VOGNClassifier, "vogn", "meanfield.md"),
    *_pair(VadamRegressor, VadamClassifier, "vadam", "meanfield.md"),
    *_pair(BBBRegressor, BBBClassifier, "bbb", "bbb_dropout.md"),
    *_pair(MCDropoutRegressor, MCDropoutClassifier, "mcdropout", "bbb_dropout.md", gaussian=False),
    EstimatorInfo(BayesianLinearRegression, "blr", "regressor", False, True, "blr.md"),
)


def all_estimators(
    task: str | None = None, network: bool | None = None, gaussian: bool | None = None
) -> list[EstimatorInfo]:
    """The registry's entries, optionally filtered.

    Parameters
    ----------
    task : {'regressor', 'classifier'}, default=None
        Only regressors or only classifiers.
    network : bool, default=None
        Only network estimators (True) or only the others (False).
    gaussian : bool, default=None
        Only estimators with a Gaussian posterior over the weights (True) or the others.

    Returns
    -------
    entries : list of EstimatorInfo
        In the order of the README's table of estimators.

    Examples
    --------
    >>> from skbayes import all_estimators
    >>> info = all_estimators(task="classifier")[0]
    >>> info.name, info.method, info.docs
    ('SLANGClassifier', 'slang', 'slang.md')
    >>> [e.name for e in all_estimators(network=False)]
    ['BayesianLinearRegression']
    """
    if task not in (None, "regressor", "classifier"):
        raise ValueError(f"task must be None, 'regressor' or 'classifier', got {task!r}")
    return [
        e
        for e in ESTIMATORS
        if (task is None or e.task == task)
        and (network is None or e.network == network)
        and (gaussian is None or e.gaussian == gaussian)
    ]
