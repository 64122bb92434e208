"""A scikit-learn ``Pipeline`` that also forwards the skbayes estimators' predictive methods.

scikit-learn's ``Pipeline`` forwards ``predict``, ``predict_proba`` and the other methods it
knows, but not ``predict_interval``, ``predict_quantiles``, ``log_likelihood``, ``sample_y``,
``sample_outputs`` or ``predict_std``: with ``sklearn.pipeline.make_pipeline`` they are
reached through ``pipe[-1]`` on ``pipe[:-1].transform(X)``. :class:`BayesianPipeline` is a
``Pipeline`` (so ``GridSearchCV``, ``cross_val_score``, cloning and pickling treat it as one)
whose extra methods transform ``X`` through the steps before the last and call the final
estimator's method; each exists only when the final estimator has it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.pipeline import Pipeline
from sklearn.pipeline import make_pipeline as _sklearn_make_pipeline
from sklearn.utils.metaestimators import available_if

__all__ = ["BayesianPipeline", "make_pipeline"]


def _final_estimator_has(attr: str) -> Callable[[Any], bool]:
    """For ``available_if``: whether the final step has ``attr`` (raising its AttributeError if not)."""

    def check(self: BayesianPipeline) -> bool:
        getattr(self._final_estimator, attr)
        return True

    return check


class BayesianPipeline(Pipeline):
    """A ``Pipeline`` that also forwards the predictive methods of its final estimator.

    Exactly :class:`sklearn.pipeline.Pipeline` (same parameters, fitting, ``predict``,
    ``predict_proba``, ``score``, ``get_params`` and step access), plus
    :meth:`predict_interval`, :meth:`predict_quantiles`, :meth:`predict_std`,
    :meth:`log_likelihood`, :meth:`sample_y` and :meth:`sample_outputs`, each of which
    transforms ``X`` through every step but the last and calls the final estimator's
    method of that name. A method exists only when the final estimator has it
    (``hasattr`` is False otherwise). ``y`` is passed on untransformed, as ``Pipeline.score``
    does.

    Parameters
    ----------
    steps : list of tuples
        ``(name, transform)`` pairs, the last an estimator (see ``sklearn.pipeline.Pipeline``).
    transform_input : list of str, default=None
        See ``sklearn.pipeline.Pipeline``.
    memory : str or object with the joblib.Memory interface, default=None
        See ``sklearn.pipeline.Pipeline``.
    verbose : bool, default=False
        See ``sklearn.pipeline.Pipeline``.

    See Also
    --------
    make_pipeline : Build one from the estimators alone, names generated.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skbayes import VOGNRegressor
    >>> from skbayes.pipeline import make_pipeline
    >>> X, y = make_regression(n_samples=200, n_features=4, noise=5.0, random_state=0)
    >>> reg = make_pipeline(StandardScaler(), VOGNRegressor(max_iter=20, random_state=0)).fit(X, y)
    >>> lower, upper = reg.predict_interval(X[:3], level=0.9)
    >>> bool((lower < upper).all())
    True
    """

    def _transform_to_final(self, X: ArrayLike) -> Any:
        """``X`` through every step but the last (as ``Pipeline.predict`` transforms it)."""
        Xt = X
        for _, _, transform in self._iter(with_final=False):
            Xt = transform.transform(Xt)
        return Xt

    @available_if(_final_estimator_has("predict_interval"))
    def predict_interval(self, X: ArrayLike, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """Central prediction intervals of the final estimator (see its ``predict_interval``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs of the first step.
        level : float, default=0.9
            Probability of each interval, in (0, 1).

        Returns
        -------
        lower : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Lower ends.
        upper : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Upper ends.
        """
        return self._final_estimator.predict_interval(self._transform_to_final(X), level=level)

    @available_if(_final_estimator_has("predict_quantiles"))
    def predict_quantiles(self, X: ArrayLike, quantiles: ArrayLike = (0.05, 0.5, 0.95)) -> np.ndarray:
        """Compute quantiles of the final estimator's predictive (see its ``predict_quantiles``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs of the first step.
        quantiles : float or array-like of shape (n_quantiles,), default=(0.05, 0.5, 0.95)
            Probabilities in (0, 1).

        Returns
        -------
        y_quantiles : ndarray of shape (n_samples, n_quantiles) or (n_samples, n_targets, n_quantiles)
            The predictive quantiles of each point.
        """
        return self._final_estimator.predict_quantiles(self._transform_to_final(X), quantiles)

    @available_if(_final_estimator_has("predict_std"))
    def predict_std(self, X: ArrayLike) -> np.ndarray:
        """Predictive standard deviation of the final estimator (see its ``predict_std``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs of the first step.

        Returns
        -------
        std : ndarray
            The final estimator's ``predict_std``.
        """
        return self._final_estimator.predict_std(self._transform_to_final(X))

    @available_if(_final_estimator_has("log_likelihood"))
    def log_likelihood(self, X: ArrayLike, y: ArrayLike, n_samples: int | None = None) -> float:
        """Mean test log-likelihood of the final estimator (see its ``log_likelihood``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs of the first step.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Observed targets (not transformed).
        n_samples : int, default=None
            Weight samples; None uses the estimator's ``predict_samples``.

        Returns
        -------
        log_likelihood : float
            Mean over the rows of the log predictive density (higher is better).
        """
        return float(self._final_estimator.log_likelihood(self._transform_to_final(X), y, n_samples=n_samples))

    @available_if(_final_estimator_has("sample_y"))
    def sample_y(self, X: ArrayLike, n_samples: int = 1, random_state: Any = 0) -> np.ndarray:
        """Draw targets from the final estimator's predictive (see its ``sample_y``).

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
            Inputs of the first step.
        n_samples : int, default=1
            Draws per input.
        random_state : int, RandomState instance or None, default=0
            Seeds the draws.

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_targets, n_samples)
            The final estimator's draws.
        """
        return self._final_estimator.sample_y(
            self._transform_to_final(X), n_samples=n_samples, random_state=random_state
        )

    @available_if(_final_estimator_has("sample_outputs"))
    def sample_outputs(self, X: ArrayLike, n_samples: int | None = None, random_state: Any = None) -> np.ndarray:
        """Network outputs under posterior weight samples (see the final estimator's ``sample_outputs``).

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            Inputs of the first step.
        n_samples : int, default=None
            Weight samples; None uses the estimator's ``predict_samples``.
        random_state : int, RandomState instance or None, default=None
            Seeds the weight samples; None gives those the prediction methods use.

        Returns
        -------
        outputs : ndarray of shape (n_samples, n_rows, n_outputs)
            The final estimator's outputs.
        """
        return self._final_estimator.sample_outputs(
            self._transform_to_final(X), n_samples=n_samples, random_state=random_state
        )


def make_pipeline(*steps: Any, **kwargs: Any) -> BayesianPipeline:
    """Construct a :class:`~skbayes.pipeline.BayesianPipeline` from the given estimators.

    ``sklearn.pipeline.make_pipeline`` (the steps named after their classes, in lower case),
    returning a :class:`BayesianPipeline`: a drop-in replacement whose pipelines also forward
    ``predict_interval``, ``predict_quantiles``, ``predict_std``, ``log_likelihood``,
    ``sample_y`` and ``sample_outputs`` to their final estimator.

    Parameters
    ----------
    *steps : list of estimators
        The transformers and, last, the estimator.
    **kwargs : dict
        ``memory``, ``transform_input``, ``verbose``: as for ``sklearn.pipeline.make_pipeline``.

    Returns
    -------
    p : skbayes.pipeline.BayesianPipeline
        The pipeline.
    """
    return BayesianPipeline(**_sklearn_make_pipeline(*steps, **kwargs).get_params(deep=False))
