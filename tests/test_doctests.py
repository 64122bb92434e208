"""Every Examples section of the public docstrings runs as written (doctest).

The modules are the package's own: every module under skbayes/ whose docstrings carry
``>>>`` examples (the estimator modules, ``linear_model``, ``metrics``, the posteriors and
the registry), found by walking the package so that a new module is covered without a
change here.
"""

import doctest
import importlib
import pkgutil
import warnings

import pytest
from sklearn.exceptions import ConvergenceWarning

import skbayes


def _modules_with_examples():
    names = []
    for info in pkgutil.walk_packages(skbayes.__path__, prefix="skbayes."):
        mod = importlib.import_module(info.name)
        if doctest.DocTestFinder(exclude_empty=True).find(mod):
            tests = doctest.DocTestFinder().find(mod)
            if any(t.examples for t in tests):
                names.append(info.name)
    return names


MODULES = _modules_with_examples()


def test_the_examples_are_found():
    # the estimator modules and the public leaves all carry examples
    for name in ("skbayes.slang", "skbayes.kfac", "skbayes.linear_model", "skbayes._registry"):
        assert name in MODULES, name


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    mod = importlib.import_module(name)
    with warnings.catch_warnings():
        # the examples use short fits (max_iter=20) to stay quick
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed (see the output above)"
