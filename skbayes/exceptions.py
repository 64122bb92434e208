"""Exceptions raised by skbayes."""

__all__ = ["InvalidParameterError", "UnsupportedLayerError"]


class InvalidParameterError(ValueError, TypeError):
    """A constructor parameter has an invalid type or value.

    Raised by ``fit`` and ``partial_fit`` before any work is done. It subclasses
    both ``ValueError`` and ``TypeError``, as scikit-learn's own
    ``InvalidParameterError`` does, so code catching either keeps working.
    """


class UnsupportedLayerError(ValueError):
    """A parameterised layer that the Kronecker-factored families cannot represent."""
