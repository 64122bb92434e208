"""Streams whose rows arrive ordered by class or by target warn (``StreamOrderWarning``).

A runs test on the arrival order: the changes of class (classifiers) or of side of the
target's mean (regressors) between consecutive rows, against their mean under a random
order of the same rows. The statistics are checked against brute force, the test's mean
against every permutation of a small multiset, and the warning on real data: ordered
streams warn once, shuffled ones never.
"""

import itertools
import pickle
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.preprocessing import StandardScaler

import skbayes
from skbayes import _loop
from skbayes.exceptions import SmallStreamWarning, StreamOrderWarning

pytestmark = pytest.mark.filterwarnings("ignore::skbayes.exceptions.SmallStreamWarning")


def _changes(seq):
    seq = np.asarray(seq)
    return int((seq[1:] != seq[:-1]).sum())


def _rows(labels):
    """Feed a sequence as one-row calls."""
    state = None
    for label in labels:
        state = _loop.stream_order_update(state, [label], 3)
    return state


def test_one_row_calls_count_the_changes_exactly():
    rng = np.random.RandomState(0)
    for labels in rng.randint(0, 3, size=(2, 50)):
        state = _rows(labels)
        assert state["n"] == 50
        assert state["changes"] == _changes(labels)
        np.testing.assert_array_equal(state["counts"], np.bincount(labels, minlength=3))


def test_a_call_counts_the_mean_changes_over_the_orders_of_its_rows():
    """Within a call the rows train in a random order: its changes (with the boundary to the
    previous call) are their mean over every order of its rows, whatever order it came in."""
    first, call = [0, 0, 1], [0, 0, 1, 2, 2]
    orders = list(itertools.permutations(call))
    expected = np.mean([_changes([first_row, *p]) for first_row in first for p in orders]) + np.mean(
        [_changes(p) for p in itertools.permutations(first)]
    )
    for order in (call, sorted(call), call[::-1]):
        state = _loop.stream_order_update(None, first, 3)
        state = _loop.stream_order_update(state, order, 3)
        assert state["changes"] == pytest.approx(expected, rel=1e-12)


def test_expected_changes_are_the_mean_over_every_order():
    """The test's mean, ``(n - 1) q``, is exactly the mean of the changes over all orders."""
    multiset = [0, 0, 0, 1, 1, 2, 2, 2]
    mean = np.mean([_changes(p) for p in set(itertools.permutations(multiset))])
    z, changes, expected = _loop.stream_order_z(_rows(multiset))
    assert expected == pytest.approx(mean, rel=1e-12)
    assert changes == _changes(multiset) == 2
    assert z < 0
    # one call of all the rows carries no order: its changes are the mean itself
    z, changes, expected = _loop.stream_order_z(_loop.stream_order_update(None, multiset, 3))
    assert changes == pytest.approx(expected, rel=1e-12) and z == pytest.approx(0.0, abs=1e-12)


def test_a_single_level_has_no_test():
    state = _loop.stream_order_update(None, np.zeros(30, dtype=int), 2)
    assert _loop.stream_order_z(state) == (0.0, 0, 0.0)


def test_shuffled_orders_stay_far_from_the_threshold():
    """Under random orders the smallest z of many draws stays well above -6."""
    rng = np.random.RandomState(0)
    labels = np.repeat(np.arange(10), 30)
    zs = []
    for _ in range(300):
        state = None
        for row in rng.permutation(labels):
            state = _loop.stream_order_update(state, [row], 10)
        zs.append(_loop.stream_order_z(state)[0])
    assert min(zs) > -4.5
    assert abs(np.mean(zs)) < 0.2  # centred


def test_the_trend_statistics_equal_the_correlation_of_the_call_number_and_the_target():
    rng = np.random.RandomState(0)
    sizes = [1, 7, 3, 30, 1, 12]
    y = rng.randn(sum(sizes), 2) * [1.0, 1e6] + [5.0, -3e7]
    y[:, 0] += 0.05 * np.repeat(np.arange(len(sizes)), sizes)  # a weak trend in the first column
    state, start = None, 0
    for m in sizes:
        state = _loop.stream_trend_update(state, y[start : start + m])
        start += m
    t = np.repeat(np.arange(len(sizes)), sizes)
    r = [np.corrcoef(t, y[:, j])[0, 1] for j in range(2)]
    k = int(np.argmax(np.abs(r)))
    z, r_k = _loop.stream_trend_z(state)
    assert r_k == pytest.approx(r[k], rel=1e-10)
    assert z == pytest.approx(abs(r[k]) * np.sqrt(len(y) - 1), rel=1e-10)
    assert state["mean_y"] == pytest.approx(y.mean(0), rel=1e-12)
    # one call has no order: no trend
    assert _loop.stream_trend_z(_loop.stream_trend_update(None, y)) == (0.0, 0.0)


def test_random_orders_show_no_trend():
    rng = np.random.RandomState(1)
    y = rng.standard_exponential((300, 1))  # skewed targets
    zs = []
    for _ in range(300):
        state = None
        for call in np.array_split(rng.permutation(y), 60):
            state = _loop.stream_trend_update(state, call)
        zs.append(_loop.stream_trend_z(state)[0])
    assert max(zs) < 4.5 and np.mean(zs) < 1.0  # |z| is half-normal: mean about 0.8


def _data(name):
    loader = {"digits": load_digits, "breast_cancer": load_breast_cancer, "diabetes": load_diabetes}[name]
    X, y = loader(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _stream(est, X, y, order, batch):
    kw = {"classes": np.unique(y)} if hasattr(est, "predict_proba") else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for s in range(0, len(order), batch):
            rows = order[s : s + batch]
            est.partial_fit(X[rows], y[rows], **kw)
    return [w for w in caught if issubclass(w.category, StreamOrderWarning)]


@pytest.mark.parametrize(
    "Est, data",
    [
        (skbayes.VOGNClassifier, "digits"),
        (skbayes.VOGNClassifier, "breast_cancer"),
        (skbayes.VOGNRegressor, "diabetes"),
    ],
)
@pytest.mark.parametrize("batch", [1, 10, 100])
def test_ordered_streams_warn_once_and_shuffled_ones_never(Est, data, batch):
    X, y = _data(data)
    n = 600 if data == "digits" else len(y)
    X, y = X[:n], y[:n]
    for seed in range(3):
        shuffled = np.random.RandomState(seed).permutation(n)
        assert _stream(Est(hidden_layer_sizes=(4,), random_state=0), X, y, shuffled, batch) == []
    ordered = np.argsort(y, kind="stable")
    caught = _stream(Est(hidden_layer_sizes=(4,), random_state=0), X, y, ordered, batch)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "shuffle the rows" in message and ("class" if data != "diabetes" else "targets trend") in message
    assert caught[0].filename == __file__  # it points at the user's partial_fit call


def test_one_sorted_call_is_no_ordered_stream():
    """A call trains on its rows in a random order: the order within a call does not warn."""
    X, y = _data("digits")
    order = np.argsort(y, kind="stable")
    est = skbayes.VOGNClassifier(hidden_layer_sizes=(4,), random_state=0)
    assert _stream(est, X, y, order, len(y)) == []  # all rows, sorted by class, in one call
    rest = np.random.RandomState(0).permutation(len(y))
    assert _stream(est, X, y, rest, 50) == []  # then shuffled calls


def test_the_warning_comes_early_in_an_ordered_stream():
    """Digits ordered by class: within the first rows of the second class."""
    X, y = _data("digits")
    order = np.argsort(y, kind="stable")
    est = skbayes.VOGNClassifier(hidden_layer_sizes=(4,), random_state=0)
    n_first = int((y == 0).sum())
    seen = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for s in range(0, len(y), 10):
            rows = order[s : s + 10]
            est.partial_fit(X[rows], y[rows], classes=np.arange(10))
            seen += len(rows)
            if any(issubclass(w.category, StreamOrderWarning) for w in caught):
                break
    assert n_first < seen <= n_first + 40


def test_fit_ends_the_stream_and_the_state_survives_pickling():
    X, y = _data("breast_cancer")
    order = np.argsort(y, kind="stable")
    est = skbayes.VOGNClassifier(hidden_layer_sizes=(4,), random_state=0)
    assert len(_stream(est, X, y, order[:300], 50)) == 1
    # a copy of the stream keeps its state: the warning is not repeated
    copy = pickle.loads(pickle.dumps(est))
    assert _stream(copy, X, y, order[300:], 50) == []
    # a fit ends the stream: a new ordered stream after it warns again
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    assert "_stream_order" not in est.__dict__
    assert len(_stream(est, X, y, order, 50)) == 1


def test_a_stream_saved_with_skops_trusts_only_the_estimator():
    sio = pytest.importorskip("skops.io")
    X, y = _data("breast_cancer")
    est = skbayes.VOGNClassifier(hidden_layer_sizes=(4,), random_state=0)
    assert len(_stream(est, X, y, np.argsort(y, kind="stable")[:300], 50)) == 1
    data = sio.dumps(est)
    name = f"{type(est).__module__}.{type(est).__name__}"
    assert sio.get_untrusted_types(data=data) == [name]
    loaded = sio.loads(data, trusted=[name])
    assert loaded._stream_order["warned"] and loaded._stream_order["n"] == 300
    np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))


def test_small_stream_and_order_warnings_are_separate():
    """A short ordered regression stream gets both: too few rows, and ordered."""
    X, y = _data("diabetes")
    order = np.argsort(y, kind="stable")[:100]
    est = skbayes.VOGNRegressor(hidden_layer_sizes=(4,), random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for s in range(0, 100, 25):
            est.partial_fit(X[order[s : s + 25]], y[order[s : s + 25]])
    kinds = [w.category for w in caught]
    assert SmallStreamWarning in kinds and kinds.count(StreamOrderWarning) == 1
