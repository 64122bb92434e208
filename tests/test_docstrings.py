"""numpydoc's validator over every public class, method, property and function.

Like scikit-learn's own ``sklearn/tests/test_docstrings.py``: the objects are the
public names of ``skbayes``, ``skbayes.posteriors``, ``skbayes.metrics``, ``skbayes.pipeline``, ``skbayes.ensemble``,
``skbayes.preprocessing`` and ``skbayes.exceptions``, and every public method or property that skbayes itself
defines on those classes (methods inherited from scikit-learn, torch or ``object``
are theirs to document). Ignored checks, and why:

- GL01, GL02: where the summary starts and the closing quotes sit (layout only);
- ES01: an extended summary is not required of every method;
- SA01: a See Also section is not required of every object;
- EX01: Examples live on the estimator classes and the documentation pages, not
  on every method;
- RT02: Returns entries are written ``name : type`` as in scikit-learn, which
  numpydoc's RT02 flags (scikit-learn ignores it too).
"""

import importlib
import inspect

import pytest

numpydoc_validate = pytest.importorskip("numpydoc.validate")

IGNORED = {"GL01", "GL02", "ES01", "SA01", "EX01", "RT02"}
MODULES = (
    "skbayes",
    "skbayes.posteriors",
    "skbayes.metrics",
    "skbayes.exceptions",
    "skbayes.pipeline",
    "skbayes.ensemble",
    "skbayes.preprocessing",
)


def _public_names(module):
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        n
        for n, obj in vars(module).items()
        if not n.startswith("_") and getattr(obj, "__module__", None) == module.__name__
    ]


def _objects():
    paths = set()
    for modname in MODULES:
        module = importlib.import_module(modname)
        for name in _public_names(module):
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue  # e.g. __version__
            paths.add(f"{modname}.{name}")
            if not inspect.isclass(obj):
                continue
            for attr in dir(obj):
                if attr.startswith("_"):
                    continue
                owner = next((k for k in obj.__mro__ if attr in k.__dict__), None)
                if owner is None or not owner.__module__.startswith("skbayes"):
                    continue
                static = inspect.getattr_static(obj, attr)
                # scikit-learn's available_if methods are descriptors around a function ``fn``
                descriptor = callable(getattr(static, "fn", None))
                if callable(static) or descriptor or isinstance(static, (property, classmethod, staticmethod)):
                    paths.add(f"{modname}.{name}.{attr}")
    return sorted(paths)


OBJECTS = _objects()


def test_every_estimator_and_posterior_is_covered():
    assert "skbayes.SLANGRegressor.fit" in OBJECTS
    assert "skbayes.NoisyKFACClassifier.predict_proba" in OBJECTS
    assert "skbayes.SLANGRegressor.log_likelihood" in OBJECTS
    assert "skbayes.posteriors.LowRankGaussian.sample" in OBJECTS
    assert "skbayes.SLANGRegressor.get_params" not in OBJECTS  # scikit-learn's
    assert len(OBJECTS) > 250


@pytest.mark.parametrize("path", OBJECTS)
def test_docstring(path):
    result = numpydoc_validate.validate(path)
    errors = [f"{code}: {msg}" for code, msg in result["errors"] if code not in IGNORED]
    assert not errors, f"{path}:\n" + "\n".join(errors)


def _regressors():
    import skbayes

    classes = [getattr(skbayes, n) for n in skbayes.__all__ if n.endswith("Regressor")]
    return [c for c in classes if "noise_prior" in c().get_params()]


@pytest.mark.parametrize("cls", _regressors(), ids=lambda c: c.__name__)
def test_noise_prior_named_in_the_docstring_is_the_default(cls):
    """A ``Gamma(a, b)`` a sentence about the noise names is the default ``noise_prior``, or is
    offered as ``noise_prior=(a, b)`` in the same sentence (the docstrings once said
    ``Gamma(6, 6)`` after the default had become vague)."""
    import re

    default = tuple(float(v) for v in cls().get_params()["noise_prior"])
    text = " ".join(inspect.getdoc(cls).split())
    named = 0
    for sentence in re.split(r"(?<=\.) ", text):
        if "noise" not in sentence:
            continue  # e.g. the hyperprior of prior_precision='auto'
        for a, b in re.findall(r"``Gamma\(([0-9.e-]+), ([0-9.e-]+)\)``", sentence):
            named += 1
            offered = f"noise_prior=({a}, {b})" in sentence
            assert (float(a), float(b)) == default or offered, f"{cls.__name__}: {sentence!r}"
    assert "noise_prior" in text and named <= 2
