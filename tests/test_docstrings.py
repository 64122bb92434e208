"""numpydoc's validator over every public class, method, property and function.

Like scikit-learn's own ``sklearn/tests/test_docstrings.py``: the objects are the
public names of ``skbayes``, ``skbayes.posteriors``, ``skbayes.metrics``, ``skbayes.pipeline``, ``skbayes.ensemble`` and
``skbayes.exceptions``, and every public method or property that skbayes itself
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
