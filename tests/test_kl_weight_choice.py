"""``kl_weight`` given as a list of candidates: ``fit`` chooses one on held-out rows.

Each candidate is fitted on the rows left after holding out ``validation_fraction`` of them
(stratified for a classifier, the split drawn from ``random_state``), scored by the held-out
rows' mean log predictive density, and the first candidate is kept unless the best one beats
it by more than one standard error of the rows' paired differences. The final posterior is
the plain fit at the chosen value on all the rows.
"""

import math

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_diabetes, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbayes import MCDropoutClassifier, NoisyEKFACClassifier, NoisyKFACClassifier, SLANGRegressor, VOGNClassifier
from skbayes._estimator import _heldout_log_densities
from skbayes._start.batched_blr import best_noise_variance

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return X[:300], y[:300]


def _split(est, X, y, stratify=True):
    """The held-out split the candidate choice draws (``validation_fraction`` of the rows)."""
    seed = int(np.random.RandomState(est.random_state).randint(np.iinfo(np.int32).max))
    n_val = math.ceil(est.validation_fraction * len(y))
    return train_test_split(X, y, test_size=n_val, random_state=seed, stratify=y if stratify else None)


def _rule(lp, first):
    """The one-standard-error rule of the docs, written out for two candidates."""
    d = lp - first
    return d.mean() > d.std(ddof=1) / math.sqrt(len(d))


def test_classifier_scores_rule_and_final_fit(cancer):
    X, y = cancer
    est = NoisyKFACClassifier(hidden_layer_sizes=(10,), max_iter=30, kl_weight=["auto", 3.0], random_state=0)
    candidates = list(est.kl_weight)
    est.fit(X, y)
    assert est.kl_weight == candidates  # the parameter is left as given
    Xf, Xv, yf, yv = _split(est, X, y)
    lps = []
    for value in (1.0, 3.0):  # 'auto' is 1.0 on this network
        cand = clone(est).set_params(kl_weight=value).fit(Xf, yf)
        p = cand.predict_proba(Xv)
        lps.append(np.log(p[np.arange(len(yv)), yv]))
        assert math.isclose(-log_loss(yv, p), lps[-1].mean(), rel_tol=1e-9)
    np.testing.assert_allclose(est.kl_weight_scores_, [lp.mean() for lp in lps], rtol=1e-10)
    assert est.kl_weight_ == (3.0 if _rule(lps[1], lps[0]) else 1.0)
    plain = clone(est).set_params(kl_weight=est.kl_weight_).fit(X, y)
    torch.testing.assert_close(est.posterior_.mean_t, plain.posterior_.mean_t, rtol=0, atol=0)


def test_a_clear_gain_switches_and_otherwise_the_first_stays():
    """Labels flipped at random: a near-MAP temperature overfits them and the untempered
    posterior wins by far more than its standard error; with the candidates reversed the
    first one stays unless beaten likewise."""
    X, y = make_classification(n_samples=1200, n_features=10, n_informative=4, flip_y=0.4, random_state=1)
    kw = dict(hidden_layer_sizes=(50,), max_iter=60, prior_precision=0.01, random_state=0)
    est = NoisyKFACClassifier(kl_weight=[0.001, 1.0], **kw).fit(X, y)
    assert est.kl_weight_ == 1.0
    gain = est.kl_weight_scores_[1] - est.kl_weight_scores_[0]
    assert gain > 0.02
    rev = NoisyKFACClassifier(kl_weight=[1.0, 0.001], **kw).fit(X, y)
    assert rev.kl_weight_ == 1.0
    np.testing.assert_allclose(rev.kl_weight_scores_, est.kl_weight_scores_[::-1], rtol=1e-10)


def test_regressor_scores_are_its_held_out_log_likelihood():
    X, y = load_diabetes(return_X_y=True)
    X, y = X[:200], y[:200]
    est = SLANGRegressor(hidden_layer_sizes=(8,), max_iter=20, kl_weight=[0.3, 1.0], random_state=0).fit(X, y)
    Xf, Xv, yf, yv = _split(est, X, y, stratify=False)
    scores = [clone(est).set_params(kl_weight=w).fit(Xf, yf).log_likelihood(Xv, yv) for w in (0.3, 1.0)]
    np.testing.assert_allclose(est.kl_weight_scores_, scores, rtol=1e-9)
    assert est.kl_weight_ in (0.3, 1.0)
    glm = clone(est).set_params(predictive="glm").fit(X, y)  # the linearised predictive's density
    gscores = [clone(glm).set_params(kl_weight=w).fit(Xf, yf).log_likelihood(Xv, yv) for w in (0.3, 1.0)]
    np.testing.assert_allclose(glm.kl_weight_scores_, gscores, rtol=1e-9)


def test_sample_weights_weight_the_held_out_scores(cancer):
    X, y = cancer
    w = np.random.RandomState(0).randint(1, 4, size=len(y)).astype(float)
    w0 = w.copy()
    est = VOGNClassifier(hidden_layer_sizes=(8,), max_iter=20, kl_weight=[0.3, 1.0], random_state=0)
    est.fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(w, w0)
    seed = int(np.random.RandomState(0).randint(np.iinfo(np.int32).max))
    Xf, Xv, yf, yv, wf, wv = train_test_split(X, y, w, test_size=30, random_state=seed, stratify=y)
    scores = []
    for value in (0.3, 1.0):
        p = clone(est).set_params(kl_weight=value).fit(Xf, yf, sample_weight=wf).predict_proba(Xv)
        scores.append(-log_loss(yv, p, sample_weight=wv))
    np.testing.assert_allclose(est.kl_weight_scores_, scores, rtol=1e-9)


def test_kl_weight_is_recorded_and_continuing_fits_keep_the_choice(cancer, monkeypatch):
    X, y = cancer
    kw = dict(hidden_layer_sizes=(8,), max_iter=5, random_state=0)
    assert NoisyKFACClassifier(**kw).fit(X, y).kl_weight_ == 1.0  # 'auto' resolved
    assert NoisyKFACClassifier(kl_weight=2.0, **kw).fit(X, y).kl_weight_ == 2.0
    assert not hasattr(MCDropoutClassifier(**kw).fit(X, y), "kl_weight_")
    est = NoisyKFACClassifier(kl_weight=[2.0, 0.5], warm_start=True, **kw).fit(X, y)
    chosen, scores = est.kl_weight_, est.kl_weight_scores_

    def no_choice(*args, **kwargs):
        raise AssertionError("a continuing fit chose again")

    monkeypatch.setattr(NoisyKFACClassifier, "_choose_kl_weight", no_choice)
    est.fit(X, y)  # warm start: continues at the chosen value
    est.partial_fit(X[:50], y[:50])
    assert est.kl_weight_ == chosen and est.kl_weight_scores_ is scores
    stream = NoisyKFACClassifier(kl_weight=[2.0, 0.5], **kw).partial_fit(X, y, classes=[0, 1])
    assert stream.kl_weight_ == 2.0  # before any fit chose: the first candidate


@pytest.mark.parametrize("bad", [[1.0], [1.0, 1], [0.3, -1.0], [0.3, "big"], [0.3, None], [0.3, [1.0]], [], (0.0, 1.0)])
def test_bad_candidate_lists_are_rejected(bad):
    X, y = np.random.RandomState(0).normal(size=(20, 2)), np.arange(20) % 2
    with pytest.raises(ValueError, match="kl_weight must be .* a list of two or more distinct candidates"):
        NoisyKFACClassifier(kl_weight=bad).fit(X, y)


def test_too_few_rows_to_hold_out_is_a_clear_error():
    X, y = np.random.RandomState(0).normal(size=(6, 2)), np.arange(6) % 2
    with pytest.raises(ValueError, match="validation_fraction=0.99 .* empty training or validation set"):
        NoisyKFACClassifier(kl_weight=[0.3, 1.0], validation_fraction=0.99).fit(X, y)


def test_constant_targets_do_not_break_the_evidence_grid():
    """A minibatch whose targets are equal up to rounding (variance 1e-31) with repeated rows:
    the noise grid is scaled to the targets' size instead of their variance."""
    X = torch.tensor([[2.0, 1.0, 1.0]] * 4 + [[4.0, 1.0, 1.0]] * 3, dtype=torch.float64)
    y = torch.full((7,), 2.0996031, dtype=torch.float64) + torch.tensor([0, 0, 0, 0, 0, 0, 4e-16])
    v = best_noise_variance(X, y, 1.0)
    assert math.isfinite(v) and 1e-5 * 4.4 <= v <= 100 * 4.4


def test_candidate_fits_do_not_leak_warnings(cancer):
    X, y = cancer
    with pytest.warns(ConvergenceWarning) as record:
        NoisyKFACClassifier(hidden_layer_sizes=(8,), max_iter=2, kl_weight=[0.3, 1.0], random_state=0).fit(X, y)
    assert sum(issubclass(r.category, ConvergenceWarning) for r in record) == 1  # the final fit's


def test_held_out_densities_of_labels_seen_and_unseen(cancer):
    """A classifier's held-out density is its probability of the row's label; a label the
    candidate never saw in training gets 1e-300 (the split keeps a row of every class on the
    training side, so this guards the scoring alone)."""
    X, y = cancer
    labels = np.array(["benign", "malignant", "rare"])[y]
    est = NoisyKFACClassifier(hidden_layer_sizes=(4,), max_iter=3, random_state=0).fit(X, labels)
    held = np.array(["malignant", "rare", "benign"])
    lp = _heldout_log_densities(est, X[:3], held)
    proba = est.predict_proba(X[:3])
    np.testing.assert_allclose(lp, [np.log(proba[0, 1]), np.log(1e-300), np.log(proba[2, 0])], rtol=1e-12)


def test_a_class_too_rare_to_stratify_keeps_a_training_row():
    """One class of a single row: the held-out rows are drawn from the rows that leave every
    class one, so no candidate is fitted on one class (a plain fit works, so must the choice)."""
    X = np.random.RandomState(0).normal(size=(20, 3))
    y = np.array([0] * 19 + [1])
    est = VOGNClassifier(hidden_layer_sizes=(4,), max_iter=3, kl_weight=[0.3, 1.0])
    for seed in range(12):
        est.set_params(random_state=seed)
        parts = est._hold_out((X, y), seed, "test")
        Xf, Xv, yf, yv = parts
        assert len(yv) == 2 and len(yf) == 18 and set(yf) == {0, 1}
        rows = np.concatenate([Xf, Xv])  # a partition of the rows
        assert np.array_equal(np.sort(rows[:, 0]), np.sort(X[:, 0]))
        est.fit(X, y)
        assert est.kl_weight_ in (0.3, 1.0)


@pytest.mark.parametrize("n, fraction", [(2, 0.1), (20, 0.95)])
def test_a_hold_out_that_would_empty_a_class_is_named(n, fraction):
    X = np.random.RandomState(0).normal(size=(n, 2))
    y = np.arange(n) % 2
    est = VOGNClassifier(hidden_layer_sizes=(4,), max_iter=3, kl_weight=[0.3, 1.0], validation_fraction=fraction)
    with pytest.raises(ValueError, match=f"validation_fraction={fraction}: holding out .* without a training row"):
        est.fit(X, y)


def test_one_class_of_positive_weight_is_named_as_by_a_plain_fit():
    X = np.random.RandomState(0).normal(size=(20, 2))
    y = np.arange(20) % 2
    with pytest.raises(ValueError, match="2 classes in the rows with a positive sample_weight"):
        VOGNClassifier(max_iter=3, kl_weight=[0.3, 1.0]).fit(X, y, sample_weight=(y == 1).astype(float))


def test_continuing_fits_train_at_a_choice_only_when_one_was_made(cancer):
    """A warm start or ``partial_fit`` after a single-value fit trains at the first candidate
    (the earlier value is no choice among them); a fresh single-value fit forgets the scores."""
    X, y = cancer
    kw = dict(hidden_layer_sizes=(8,), max_iter=3, random_state=0)
    est = NoisyKFACClassifier(kl_weight=0.5, warm_start=True, **kw).fit(X, y)
    est.set_params(kl_weight=[2.0, 1.0]).fit(X, y)
    assert est.kl_weight_ == 2.0 and not hasattr(est, "kl_weight_scores_")
    stream = NoisyKFACClassifier(kl_weight=0.5, **kw).fit(X, y)
    stream.set_params(kl_weight=[2.0, 1.0]).partial_fit(X[:50], y[:50])
    assert stream.kl_weight_ == 2.0
    chosen = NoisyKFACClassifier(kl_weight=[2.0, 0.5], **kw).fit(X, y)
    assert hasattr(chosen, "kl_weight_scores_")
    chosen.set_params(kl_weight=0.5).fit(X, y)
    assert not hasattr(chosen, "kl_weight_scores_") and chosen.kl_weight_ == 0.5
    chosen.set_params(kl_weight=[0.5, 2.0], warm_start=True).fit(X, y)  # the scores went with the choice
    assert chosen.kl_weight_ == 0.5 and not hasattr(chosen, "kl_weight_scores_")


def test_a_list_with_auto_resolves_it_for_the_network_trained(monkeypatch):
    """'auto' among the candidates stands for the value of the network the fit trains (here
    a large one: 0.01 for noisy EK-FAC's classifier, whose only size-dependent parameter it
    is), in the candidates' fits and in the final one (the rule is made to keep the first)."""
    monkeypatch.setattr("skbayes._estimator._paired_gain", lambda *args: (0.0, 1.0))
    rng = np.random.RandomState(0)
    X = rng.normal(size=(60, 210))
    y = (X[:, 0] > 0).astype(int)
    kw = dict(hidden_layer_sizes=(100,), max_iter=1, random_state=0)
    auto = NoisyEKFACClassifier(**kw).fit(X, y)
    assert auto.posterior_.n_params >= 20_000 and auto.kl_weight_ == 0.01
    listed = NoisyEKFACClassifier(kl_weight=["auto", 5.0], **kw).fit(X, y)
    assert listed.kl_weight_ == 0.01
    np.testing.assert_array_equal(listed.predict_proba(X), auto.predict_proba(X))
