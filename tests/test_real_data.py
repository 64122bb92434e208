"""Statistical claims on real data (scikit-learn's bundled datasets), fixed seeds."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import BayesianRidge, LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayes import NoisyEKFACClassifier, NoisyKFACClassifier, SLANGClassifier, SLANGRegressor
from skbayes.metrics import expected_calibration_error, gaussian_log_likelihood, interval_coverage

pytestmark = pytest.mark.usefixtures("quiet")  # short fits on purpose: no ConvergenceWarning noise


def test_metrics_against_hand_computations():
    assert expected_calibration_error([0, 1], np.array([[0.9, 0.1], [0.2, 0.8]]), n_bins=10) == pytest.approx(0.15)
    assert interval_coverage([0.0, 2.0], [0.0, 0.0], [1.0, 1.0], level=0.9) == 0.5
    assert gaussian_log_likelihood([0.0], [0.0], [1.0]) == pytest.approx(-0.5 * np.log(2 * np.pi))


def test_diabetes_intervals_and_log_likelihood():
    """Pooled over 5 random 70/30 splits: 90% intervals cover 85-95% of held-out targets and
    the held-out log-likelihood is within 0.05 nats/point of BayesianRidge's."""
    X, y = load_diabetes(return_X_y=True)
    cov, ll, ll_br = [], [], []
    for seed in range(5):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed)
        reg = make_pipeline(
            StandardScaler(), SLANGRegressor(hidden_layer_sizes=(20,), prior_precision=30.0, random_state=seed)
        ).fit(Xtr, ytr)
        m, s = reg.predict(Xte, return_std=True)
        cov.append(interval_coverage(yte, m, s, 0.9))
        ll.append(gaussian_log_likelihood(yte, m, s))
        br = make_pipeline(StandardScaler(), BayesianRidge()).fit(Xtr, ytr)
        mb, sb = br.predict(Xte, return_std=True)
        ll_br.append(gaussian_log_likelihood(yte, mb, sb))
    assert 0.85 <= np.mean(cov) <= 0.95, np.mean(cov)
    assert np.mean(ll) >= np.mean(ll_br) - 0.05, (np.mean(ll), np.mean(ll_br))


@pytest.mark.parametrize("Clf", [SLANGClassifier, NoisyKFACClassifier, NoisyEKFACClassifier])
def test_breast_cancer_accuracy_and_calibration(Clf):
    """Out-of-fold predictions of 5-fold CV, averaged over 3 shuffles (one fold split is
    +-0.5 points of noise): accuracy within 1 point of LogisticRegression, ECE < 0.05,
    with the estimators' defaults (i-BLM start included)."""
    X, y = load_breast_cancer(return_X_y=True)
    acc, acc_lr, ece = [], [], []
    for seed in range(3):
        cv = StratifiedKFold(5, shuffle=True, random_state=seed)
        p_lr = cross_val_predict(
            make_pipeline(StandardScaler(), LogisticRegression()), X, y, cv=cv, method="predict_proba"
        )
        p = cross_val_predict(
            make_pipeline(StandardScaler(), Clf(random_state=seed)), X, y, cv=cv, method="predict_proba"
        )
        acc.append((p.argmax(1) == y).mean())
        acc_lr.append((p_lr.argmax(1) == y).mean())
        ece.append(expected_calibration_error(y, p))
    assert np.mean(acc) >= np.mean(acc_lr) - 0.01, (acc, acc_lr)
    assert np.mean(ece) < 0.05, ece


def _sklearn_at_least(major, minor):
    import sklearn

    return tuple(int(p) for p in sklearn.__version__.split(".")[:2]) >= (major, minor)


@pytest.mark.skipif(not _sklearn_at_least(1, 8), reason="method='temperature' came with scikit-learn 1.8")
def test_temperature_scaling_sharpens_the_cautious_default_predictive():
    """scikit-learn's temperature scaling composes with a skbayes classifier, and what it
    learns is what docs/uncertainty.md reports: on digits (a stratified 75/25 split) noisy
    K-FAC's default predictive is cautious in distribution, so
    ``CalibratedClassifierCV(method='temperature')`` sharpens it (an inverse temperature
    above 1) and lowers its test ECE and log-loss; the class predictions are unchanged."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.datasets import load_digits
    from sklearn.metrics import log_loss

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.25, stratify=y, random_state=0)
    plain = make_pipeline(StandardScaler(), NoisyKFACClassifier(random_state=0)).fit(Xtr, ytr)
    scaled = CalibratedClassifierCV(
        make_pipeline(StandardScaler(), NoisyKFACClassifier(random_state=0)), method="temperature", cv=3, ensemble=False
    ).fit(Xtr, ytr)
    beta = scaled.calibrated_classifiers_[0].calibrators[0].beta_  # multiplies the log-probabilities
    p0, p1 = plain.predict_proba(Xte), scaled.predict_proba(Xte)
    assert beta > 1.1, beta
    assert np.array_equal(p1.argmax(1), p0.argmax(1))  # the refit on every row is the plain fit
    assert expected_calibration_error(yte, p1) < expected_calibration_error(yte, p0) - 0.005
    assert log_loss(yte, p1) < log_loss(yte, p0) - 0.003
