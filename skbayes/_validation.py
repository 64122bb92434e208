"""Declarative parameter validation, in the style of scikit-learn's ``_parameter_constraints``.

Every estimator class and every posterior family declares a table
``{parameter name: [constraint, ...]}``; a value is valid when it satisfies any
constraint of its list. The tables are merged along the class hierarchy and
checked once, at the start of ``fit`` / ``partial_fit``, before any state is
touched. scikit-learn keeps its ``Interval`` / ``StrOptions`` machinery
private, so this is a small local version with the same error type.

The data checks at the end (:func:`validate_data`, :func:`check_sample_weight`) wrap
scikit-learn's, so that every supported scikit-learn release gives the same clear errors.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.utils.validation import _check_sample_weight
from sklearn.utils.validation import validate_data as _sklearn_validate_data

from .exceptions import InvalidParameterError


class Constraint:
    """A set of valid values with a description for error messages."""

    def is_satisfied_by(self, value: Any) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def __str__(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


class Interval(Constraint):
    """Finite real (or integer) numbers in a range.

    ``closed`` is one of 'left', 'right', 'both', 'neither'; a bound of None is
    unbounded. NaN and infinities never satisfy an interval, and booleans are
    not numbers here.
    """

    def __init__(self, kind: type, low: float | None, high: float | None, closed: str = "both") -> None:
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def is_satisfied_by(self, value: Any) -> bool:
        kind = numbers.Integral if self.kind is numbers.Integral else numbers.Real
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, kind):
            return False
        if not math.isfinite(value):
            return False
        value = float(value)  # a finite real (an int compares the same as a float here)
        lo_closed = self.closed in ("left", "both")
        hi_closed = self.closed in ("right", "both")
        if self.low is not None and not (value > self.low or (lo_closed and value == self.low)):
            return False
        if self.high is not None and not (value < self.high or (hi_closed and value == self.high)):
            return False
        return True

    def __str__(self) -> str:
        what = "an int" if self.kind is numbers.Integral else "a finite number"
        lo_closed = self.closed in ("left", "both")
        hi_closed = self.closed in ("right", "both")
        if self.low is not None and self.high is not None:
            return f"{what} in {'[' if lo_closed else '('}{self.low}, {self.high}{']' if hi_closed else ')'}"
        if self.low is not None:
            return f"{what} {'>=' if lo_closed else '>'} {self.low}"
        if self.high is not None:
            return f"{what} {'<=' if hi_closed else '<'} {self.high}"
        return what


class Options(Constraint):
    """One of a fixed set of values (strings, usually)."""

    def __init__(self, options: Iterable[Any]) -> None:
        self.options = tuple(options)

    def is_satisfied_by(self, value: Any) -> bool:
        try:
            return any(value == o and type(value) is type(o) for o in self.options)
        except Exception:  # e.g. an array compared to a string
            return False

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.options)


class _NoneConstraint(Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        return value is None

    def __str__(self) -> str:
        return "None"


class _Boolean(Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, (bool, np.bool_))

    def __str__(self) -> str:
        return "a bool"


class _InstanceOf(Constraint):
    def __init__(self, kind: type, name: str) -> None:
        self.kind, self.name = kind, name

    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, self.kind)

    def __str__(self) -> str:
        return self.name


class _Callable(Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        return callable(value)

    def __str__(self) -> str:
        return "a callable"


class _RandomState(Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        return (
            value is None
            or isinstance(value, np.random.RandomState)
            or (
                isinstance(value, numbers.Integral)
                and not isinstance(value, (bool, np.bool_))
                and 0 <= int(value) < 2**32
            )
        )

    def __str__(self) -> str:
        return "an int in [0, 2**32 - 1], a numpy RandomState or None"


class Check(Constraint):
    """A predicate with its own description (for structured values such as tuples)."""

    def __init__(self, predicate: Callable[[Any], bool], description: str) -> None:
        self.predicate, self.description = predicate, description

    def is_satisfied_by(self, value: Any) -> bool:
        try:
            return bool(self.predicate(value))
        except Exception:
            return False

    def __str__(self) -> str:
        return self.description


NONE = _NoneConstraint()
BOOLEAN = _Boolean()
CALLABLE = _Callable()
RANDOM_STATE = _RandomState()


def instance_of(kind: type, name: str) -> Constraint:
    """Values of type ``kind``, described as ``name`` in messages."""
    return _InstanceOf(kind, name)


def merged_constraints(*tables: Mapping[str, Sequence[Constraint]]) -> dict[str, list[Constraint]]:
    """Later tables override earlier ones, name by name."""
    out: dict[str, list[Constraint]] = {}
    for t in tables:
        out.update({k: list(v) for k, v in t.items()})
    return out


def validate_params(owner: str, params: Mapping[str, Any], constraints: Mapping[str, Sequence[Constraint]]) -> None:
    """Raise :class:`InvalidParameterError` naming the first invalid parameter.

    Parameters
    ----------
    owner : str
        Name of the estimator, for the message.
    params : mapping
        Parameter values (``get_params(deep=False)``).
    constraints : mapping
        ``{name: [constraint, ...]}``; parameters without an entry are not checked.
    """
    for name, allowed in constraints.items():
        if name not in params:
            continue
        value = params[name]
        if any(c.is_satisfied_by(value) for c in allowed):
            continue
        described = [str(c) for c in allowed]
        text = described[0] if len(described) == 1 else ", ".join(described[:-1]) + " or " + described[-1]
        raise InvalidParameterError(f"{owner}: {name} must be {text}, got {value!r}.")


# --- data ----------------------------------------------------------------------------------
def validate_data(estimator: Any, X: Any, *args: Any, **kwargs: Any) -> Any:
    """scikit-learn's ``validate_data``, with a clear error for an ``X`` of no columns.

    scikit-learn's ``check_array`` reports an array of no columns ("Found array with 0
    feature(s)") but fails earlier, inside numpy ("at least one array or dtype is
    required"), on a pandas DataFrame of none (what a ``ColumnTransformer`` that selects
    nothing returns); this raises its message for both.
    """
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) == 2 and shape[1] == 0:
        raise ValueError(
            f"Found array with 0 feature(s) (shape={tuple(shape)}) while a minimum of 1 is required "
            f"by {type(estimator).__name__}."
        )
    return _sklearn_validate_data(estimator, X, *args, **kwargs)


def check_sample_weight(sample_weight: Any, X: np.ndarray) -> np.ndarray:
    """Sample weights as a new or validated float64 array: one finite, non-negative weight per
    row of ``X`` (scikit-learn's checks), not all zero (which only recent scikit-learn releases
    check: a fit with every weight zero has no data)."""
    sw: np.ndarray = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    if not bool(np.any(sw)):
        raise ValueError("Sample weights must contain at least one non-zero number.")
    return sw
