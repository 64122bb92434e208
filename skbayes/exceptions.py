"""Exceptions raised by skbayes."""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

__all__ = [
    "InputScaleWarning",
    "InvalidParameterError",
    "MemoryLimitError",
    "NonFiniteOutputError",
    "PoorFitWarning",
    "SmallStreamWarning",
    "StreamOrderWarning",
    "UnsupportedLayerError",
]


class InvalidParameterError(ValueError, TypeError):
    """A constructor parameter has an invalid type or value.

    Raised by ``fit`` and ``partial_fit`` before any work is done. It subclasses
    both ``ValueError`` and ``TypeError``, as scikit-learn's own
    ``InvalidParameterError`` does, so code catching either keeps working.
    """


class UnsupportedLayerError(ValueError):
    """A layer of a custom ``module`` that an estimator cannot represent.

    A parameterised layer the Kronecker-factored families have no factors for, or, in any
    estimator, a layer that mixes the rows of a batch (batch normalisation)."""


class NonFiniteOutputError(ValueError, FloatingPointError):
    """A fitted model's prediction for some inputs is not a finite number.

    Raised by the prediction methods instead of returning ``inf`` or ``nan``:
    usually the inputs lie far outside the range of the training data (their
    network outputs or predictive variances overflow). A ``ValueError`` (the
    inputs are the cause) and a ``FloatingPointError`` (what happened).
    """


class InputScaleWarning(UserWarning):
    """The training inputs are far from unit scale.

    The network estimators do not rescale their inputs (their weight priors and
    initialisations assume features of roughly unit spread, as a
    ``StandardScaler`` gives); with columns whose standard deviation is below
    ``1e-3`` or above ``1e3`` their fits can fail silently. The fix is a
    ``StandardScaler`` (or similar) in a ``Pipeline`` before the estimator.
    """


class PoorFitWarning(UserWarning):
    """A fitted model predicts its own training data worse than a constant does.

    Usually the step sizes were too large or the inputs badly scaled; see the
    warning's message.
    """


class SmallStreamWarning(UserWarning):
    """``partial_fit`` has seen too few rows to set the target scaling and the start.

    Until ``iblm_batch_size`` rows have arrived, each ``partial_fit`` call
    re-initialises the model from all the rows seen so far (the target scaling of
    the regressors and the i-BLM start need more than a handful of rows); a model
    fitted on so few rows is not to be trusted.
    """


class StreamOrderWarning(UserWarning):
    """The calls of a ``partial_fit`` stream arrive far from a random order.

    A shuffled stream would almost never show such long runs of one class
    (classifiers), or such a trend of the targets with the call number (regressors).

    Each ``partial_fit`` call moves the model towards the rows it holds, and earlier
    calls' rows are not seen again, so a stream ordered by class or by target learns
    far less than one ``fit`` on the same rows. Raised once per stream, when a runs
    test of the classes (the changes of class between consecutive rows, a call's rows
    taken in a random order, since a call trains on them so) falls more than 6 standard
    deviations below its mean under a random order of the stream, or when the
    correlation between the call number and the target is more than 6 standard
    deviations from 0. Shuffle the rows before streaming them, or collect rows until
    each call holds every class.
    """


class MemoryLimitError(MemoryError, ValueError):
    """A dense computation would need more memory than allowed.

    Raised before anything large is allocated (by ``BayesianLinearRegression``
    above ``skbayes.linear_model.MEMORY_LIMIT_GIB``, and by a posterior's dense
    ``precision()`` / ``covariance()`` above the machine's physical memory). The
    message names the estimated size, the shapes involved and what to do
    instead. It subclasses ``MemoryError`` (what would otherwise happen) and
    ``ValueError`` (the input is too large for an exact dense computation).
    """


_PACKAGE_PREFIX = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _library_prefixes() -> tuple[str, ...]:
    """The directories of the libraries that call estimators for the user (scikit-learn's
    pipelines and searches, joblib), among those already imported."""
    out = []
    for name in ("sklearn", "joblib"):
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None) if module is not None else None
        if path:
            out.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return tuple(out)


def _warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the user's line: the first caller outside skbayes,
    and beyond it outside scikit-learn and joblib (a Pipeline, a search) when the stack
    reaches user code at all (in a joblib worker it does not: then the first caller
    outside skbayes)."""
    frame: FrameType | None = sys._getframe(1)
    level = 1  # level 1: _warn's caller
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_PREFIX):
        frame, level = frame.f_back, level + 1
    prefixes = _library_prefixes()
    outer: FrameType | None = frame
    outer_level = level
    while outer is not None and outer.f_code.co_filename.startswith(prefixes + (_PACKAGE_PREFIX,)):
        outer, outer_level = outer.f_back, outer_level + 1
    if outer is not None:
        level = outer_level
    warnings.warn(message, category, stacklevel=level + 1)
