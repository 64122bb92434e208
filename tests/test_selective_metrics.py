"""Selective-prediction metrics: ``risk_coverage_curve`` and ``area_under_risk_coverage``.

Checked against brute force (the error rate of the ``k`` most confident rows for every
``k``; for tied confidences, the average over every order of the tied rows), for their
invariances, on real data (a classifier's confidence ranks its errors last, a random one
does not), and for the input validation shared with ``expected_calibration_error``.
"""

import itertools

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import make_scorer
from sklearn.model_selection import cross_val_score, train_test_split

from skbayes.metrics import area_under_risk_coverage, expected_calibration_error, risk_coverage_curve


def _random_problem(n, k=4, seed=0, ties=False):
    rng = np.random.RandomState(seed)
    logits = rng.normal(size=(n, k)) * 2
    if ties:  # 20 distinct rows: many rows share their top-class probability
        logits = logits[rng.randint(20, size=n)]
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = np.where(rng.rand(n) < 0.7, p.argmax(1), rng.randint(k, size=n))
    return y, p


def _topk_risks(conf, wrong):
    """Brute force: the error rate of the k most confident rows, k = 1..n, in the given order."""
    order = sorted(range(len(conf)), key=lambda i: -conf[i])
    return np.array([np.mean([wrong[i] for i in order[:k]]) for k in range(1, len(conf) + 1)])


def test_without_ties_the_area_is_the_mean_top_k_error_rate():
    y, p = _random_problem(60)
    conf, wrong = p.max(1), p.argmax(1) != y
    assert len(np.unique(conf)) == len(conf)
    risks = _topk_risks(conf, wrong)
    assert area_under_risk_coverage(y, p) == pytest.approx(np.mean(risks), rel=1e-12)
    coverage, risk, thresholds = risk_coverage_curve(y, p)
    np.testing.assert_allclose(coverage, np.arange(1, 61) / 60, rtol=1e-15)
    np.testing.assert_allclose(risk, risks, rtol=1e-12)
    np.testing.assert_array_equal(thresholds, np.sort(conf)[::-1])


def test_tied_confidences_are_averaged_over_their_orders():
    # 7 rows, confidences in three tied groups; the expectation over all 7! orders of the
    # tied rows equals the average over the orders within each group (enumerated here)
    p = np.array([[0.8, 0.2], [0.2, 0.8], [0.8, 0.2], [0.6, 0.4], [0.4, 0.6], [0.6, 0.4], [0.7, 0.3]])
    y = np.array([0, 0, 1, 0, 0, 1, 1])
    conf, wrong = p.max(1), p.argmax(1) != y
    areas = []
    for perm in itertools.permutations(range(7)):
        # every order of the rows; a stable sort by confidence keeps the permuted order among ties
        c, w = conf[list(perm)], wrong[list(perm)]
        order = np.argsort(-c, kind="stable")
        areas.append(np.mean(np.cumsum(w[order]) / np.arange(1, 8)))
    assert area_under_risk_coverage(y, p) == pytest.approx(np.mean(areas), rel=1e-12)
    # the curve has one point per distinct confidence, at the end of each tied group
    coverage, risk, thresholds = risk_coverage_curve(y, p)
    np.testing.assert_allclose(thresholds, [0.8, 0.7, 0.6])
    np.testing.assert_allclose(coverage, [3 / 7, 4 / 7, 1.0])
    np.testing.assert_allclose(risk, [2 / 3, 3 / 4, 5 / 7])


def test_the_area_does_not_depend_on_the_order_of_the_rows():
    y, p = _random_problem(300, ties=True, seed=1)
    assert len(np.unique(p.max(1))) <= 20  # many ties
    perm = np.random.RandomState(2).permutation(300)
    assert area_under_risk_coverage(y[perm], p[perm]) == pytest.approx(area_under_risk_coverage(y, p), rel=1e-12)
    for a, b in zip(risk_coverage_curve(y[perm], p[perm]), risk_coverage_curve(y, p)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_extreme_rankings():
    p = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.6, 0.4]])
    assert area_under_risk_coverage([0, 0, 0, 0], p) == 0.0
    # the one error is the least confident row: only the last of the four rates counts it
    assert area_under_risk_coverage([0, 0, 0, 1], p) == pytest.approx(0.25 / 4)
    # the one error is the most confident row: every rate counts it
    assert area_under_risk_coverage([1, 0, 0, 0], p) == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    # one confidence for all rows: the area is the error rate
    flat = np.full((5, 2), 0.5)
    assert area_under_risk_coverage([0, 1, 1, 0, 1], flat) == pytest.approx(0.6)  # argmax: column 0


def test_a_classifiers_confidence_ranks_its_errors_last():
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.5, random_state=0, stratify=y)
    p = LogisticRegression(max_iter=2000).fit(Xtr, ytr).predict_proba(Xte)
    error = np.mean(p.argmax(1) != yte)
    aurc = area_under_risk_coverage(yte, p)
    assert 0.01 < error < 0.1
    assert aurc < error / 4  # the errors sit among the least confident rows
    # confidences unrelated to the errors: the area is the error rate, up to the order's noise
    rng = np.random.RandomState(0)
    shuffled = p.copy()
    shuffled[np.arange(len(p)), p.argmax(1)] = rng.uniform(0.5, 1.0, size=len(p))
    assert shuffled.argmax(1).tolist() == p.argmax(1).tolist()
    assert area_under_risk_coverage(yte, shuffled) == pytest.approx(error, abs=0.02)
    # the risk at 90% coverage of the curve is below the error rate of all rows
    coverage, risk, _ = risk_coverage_curve(yte, p)
    assert risk[np.searchsorted(coverage, 0.9)] < error


def test_labels_name_the_columns():
    y, p = _random_problem(50, k=3, seed=3)
    names = np.array(["cat", "dog", "emu"])
    assert area_under_risk_coverage(names[y], p, labels=names) == area_under_risk_coverage(y, p)
    assert expected_calibration_error(names[y], p, labels=names) == expected_calibration_error(y, p)
    for a, b in zip(risk_coverage_curve(names[y], p, labels=names), risk_coverage_curve(y, p)):
        np.testing.assert_array_equal(a, b)


def test_as_a_scikit_learn_scorer():
    X, y = load_digits(return_X_y=True)
    scorer = make_scorer(area_under_risk_coverage, greater_is_better=False, response_method="predict_proba")
    scores = cross_val_score(LogisticRegression(max_iter=500), X[:600] / 16.0, y[:600], cv=3, scoring=scorer)
    assert np.all(scores < 0) and np.all(scores > -0.05)


@pytest.mark.parametrize(
    "y, p, labels, match",
    [
        ([0, 1, 2], np.full((3, 2), 0.5), None, r"integers in \[0, 2\)"),
        ([0, 0.5], np.full((2, 2), 0.5), None, "column indices"),
        (["a", "b"], np.full((2, 2), 0.5), None, "pass labels"),
        (["a", "c"], np.full((2, 2), 0.5), ["a", "b"], "not in labels"),
        ([0, 1], np.full((2, 2), 0.5), ["a", "b", "c"], "3 entries but proba has 2 columns"),
        ([0, 1, 1], np.full((2, 2), 0.5), None, "inconsistent numbers of samples"),
        ([0, 1], np.array([[0.5, np.nan], [0.5, 0.5]]), None, "NaN"),
    ],
)
def test_bad_input_gets_a_clear_error(y, p, labels, match):
    for metric in (area_under_risk_coverage, risk_coverage_curve, expected_calibration_error):
        with pytest.raises(ValueError, match=match):
            metric(y, p, labels=labels)


def test_inputs_are_not_modified():
    y, p = _random_problem(40, seed=4)
    y0, p0 = y.copy(), p.copy()
    area_under_risk_coverage(y, p)
    risk_coverage_curve(y, p)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(p, p0)
