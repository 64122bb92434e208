"""The parameter tables of the estimators' documentation pages against the code's defaults.

Each page (``docs/<page>.md``) has a table ``| parameter | default | meaning |``. Where its
default cell is a Python literal (``(50,)``, ``'auto'``, ``1e-3``, ``None``), or literals for
named groups (``30 (`NoisyKFACClassifier`), None (the others)``, ``100 (regressors), 'auto'
(classifiers)``, ``1e-3 (K-FAC), 0.1 (EK-FAC)``), it must equal ``get_params()`` of every
estimator the row applies to (a row's ``(qualifier)`` after the name narrows it the same way).
Cells in prose (rules that depend on the network's size) are not read; each page must have
most of its rows checked, so a change of format cannot silently turn the test off. The
docstrings once named a default noise prior the code had dropped; these tables are the
pages' copy of the same facts.
"""

import ast
import re
from pathlib import Path

import pytest

import skbayes
import skbayes.ensemble

DOCS = Path(__file__).resolve().parents[1] / "docs"

#: page -> the estimators its table describes
PAGES = {
    "bbb_dropout.md": ["BBBRegressor", "BBBClassifier", "MCDropoutRegressor", "MCDropoutClassifier"],
    "kfac.md": ["NoisyKFACRegressor", "NoisyKFACClassifier", "NoisyEKFACRegressor", "NoisyEKFACClassifier"],
    "slang.md": ["SLANGRegressor", "SLANGClassifier"],
    "meanfield.md": ["VadamRegressor", "VadamClassifier"],
    "blr.md": ["BayesianLinearRegression"],
    "ensemble.md": ["PosteriorEnsembleRegressor", "PosteriorEnsembleClassifier"],
}


def _estimator(name):
    return getattr(skbayes, name, None) or getattr(skbayes.ensemble, name)


def _rows(page):
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\|\s*parameter\s*\|\s*default\s*\|", line))
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            return
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        yield cells[0], cells[1]


def _literal(text):
    """A Python literal written as ``literal`` or bare, or None."""
    m = re.fullmatch(r"`([^`]*)`|([^\s`(),;]+|\([^`]*\))", text.strip())
    if not m:
        return None
    try:
        return (ast.literal_eval(m.group(1) if m.group(1) is not None else m.group(2)),)
    except (ValueError, SyntaxError):
        return None


def _applies(qualifier, name, others):
    """Whether a ``(qualifier)`` names the estimator ``name`` (``others``: the names no other
    part of the cell named)."""
    q = qualifier.strip().lower().replace("only", "").strip()
    if q == "the others":
        return name in others
    cls = re.fullmatch(r"`(\w+)`", qualifier.strip())
    if cls:
        return name == cls.group(1)
    if q in ("regressor", "regressors"):
        return name.endswith("Regressor") or name == "BayesianLinearRegression"
    if q in ("classifier", "classifiers"):
        return name.endswith("Classifier")
    if q == "k-fac":
        return "KFAC" in name and "EKFAC" not in name
    if q == "ek-fac":
        return "EKFAC" in name
    if q == "bbb":
        return name.startswith("BBB")
    if q == "mc dropout":
        return name.startswith("MCDropout")
    raise ValueError(f"unknown qualifier {qualifier!r}")


def _expected(cell, names):
    """{estimator name: documented default} for a default cell, or None (prose)."""
    whole = _literal(cell)
    if whole is not None:
        return {n: whole[0] for n in names}
    parts = [p.strip() for p in re.split(r",\s+(?![^(]*\))", cell)]
    parsed = []
    for part in parts:
        m = re.fullmatch(r"(`[^`]*`|[^\s(`]+)\s*\(([^()]*)\)", part)
        if not m or _literal(m.group(1)) is None:
            return None
        parsed.append((_literal(m.group(1))[0], m.group(2)))
    out, named = {}, set()
    for value, qual in parsed:
        if qual.strip().lower() != "the others":
            for n in names:
                if _applies(qual, n, ()):
                    out[n] = value
                    named.add(n)
    for value, qual in parsed:
        if qual.strip().lower() == "the others":
            out.update({n: value for n in names if n not in named})
    return out


def _same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == pytest.approx(b, rel=1e-12)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("page", sorted(PAGES))
def test_parameter_tables_state_the_defaults(page):
    names = PAGES[page]
    defaults = {n: _estimator(n)().get_params() for n in names}
    checked, rows = 0, 0
    for name_cell, default_cell in _rows(page):
        rows += 1
        m = re.fullmatch(r"`(\w+)`(?:\s*\((.*)\))?", name_cell)
        assert m, f"{page}: parameter cell {name_cell!r}"
        param, qual = m.group(1), m.group(2)
        scope = [n for n in names if param in defaults[n] and (qual is None or _applies(qual, n, names))]
        assert scope, f"{page}: `{param}` is no parameter of {names}"
        expected = _expected(default_cell, scope)
        if expected is None:
            continue  # prose
        checked += 1
        for n, value in expected.items():
            got = defaults[n][param]
            assert _same(got, value), f"{page}: {n}'s `{param}` defaults to {got!r}, the table says {default_cell!r}"
    assert checked >= 0.6 * rows, f"{page}: only {checked} of {rows} rows read as literals"
