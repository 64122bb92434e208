"""The linearised (GLM) predictive against dense Jacobian computations.

The reference of a row's output covariance is ``J Sigma J^T`` with ``J`` from
``torch.autograd.functional.jacobian`` of the network at the posterior mean and
``Sigma`` from ``posterior_.covariance()``: nothing of the estimator's own prediction
code is used. Tolerances: float64, ``c * D * eps`` relative to the largest entry of the
matrices involved (sums of ``D`` products, with the Woodbury and Kronecker solves of
well-conditioned small factors).
"""

import math

import numpy as np
import pytest
import torch
from sklearn.utils.estimator_checks import parametrize_with_checks
from torch import nn
from torch.func import functional_call

from skbayes import (
    BBBClassifier,
    BBBRegressor,
    MCDropoutClassifier,
    NoisyEKFACClassifier,
    NoisyKFACClassifier,
    NoisyKFACRegressor,
    SLANGClassifier,
    SLANGRegressor,
    _predictive,
    all_estimators,
)
from skbayes.exceptions import InvalidParameterError

EPS = float(np.finfo(np.float64).eps)
#: Every network estimator with the ``predictive`` parameter (the Gaussian ones), from the registry.
REGRESSORS = [e.estimator for e in all_estimators(task="regressor") if "predictive" in e.estimator().get_params()]
CLASSIFIERS = [e.estimator for e in all_estimators(task="classifier") if "predictive" in e.estimator().get_params()]


def _data(n=40, d=3, classes=None, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n, d))
    if classes is None:
        y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)
        return X, (y - y.mean()) / y.std()  # standardised: the network's units are y's units
    return X, rng.randint(classes, size=n)


class Wrapped(nn.Module):
    """An MLP that is not an ``nn.Sequential``: prediction takes the generic ``torch.func`` path."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(n_in, 4), nn.Tanh(), nn.Linear(4, n_out))

    def forward(self, x):
        return self.inner(x)


#: The dense path with one hidden layer (the output layer's Jacobian is the identity, the
#: hidden layer's one matrix times each row's activation derivatives) and two (the first
#: layer's differs per row); the generic path with the wrapped module's own layers.
PATHS = [(False, (5,)), (False, (4, 3)), (True, (5,))]
PATH_IDS = ["dense-path", "dense-path-two-hidden", "generic-path"]


def _dense_reference(est, X):
    """``f(x; mu)`` (n, k) and ``J Sigma J^T`` (n, k, k) by a dense Jacobian and covariance."""
    net = est.module_
    names = [n for n, p in net.named_parameters()]
    shapes = [p.shape for p in net.parameters()]
    sizes = [p.numel() for p in net.parameters()]

    def f(theta):
        params, off = {}, 0
        for n, s, c in zip(names, shapes, sizes):
            params[n] = theta[off : off + c].reshape(s)
            off += c
        return functional_call(net, params, (torch.as_tensor(X),))

    mu = torch.as_tensor(est.posterior_.mean)
    J = torch.autograd.functional.jacobian(f, mu)  # (n, k, D)
    Sigma = torch.as_tensor(est.posterior_.covariance())
    with torch.no_grad():
        mean = f(mu)
    return mean.numpy(), torch.einsum("nkd,de,nle->nkl", J, Sigma, J).numpy(), J, Sigma


def _tol(J, Sigma):
    """``c D eps`` times the size of the terms of ``J Sigma J^T``."""
    D = Sigma.shape[0]
    scale = float(torch.einsum("nkd,de,nle->nkl", J.abs(), Sigma.abs(), J.abs()).max())
    return 50 * D * EPS * scale


def _fit(Est, classes=None, module=None, **kw):
    X, y = _data(classes=classes)
    kw = {"hidden_layer_sizes": (5,), "max_iter": 3, "random_state": 0, "predictive": "glm", **kw}
    if module is not None:
        kw["module"] = module
    return Est(**kw).fit(X, y), X


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(("generic", "hidden"), PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("Est", REGRESSORS)
def test_regressor_moments_equal_dense_jacobian_reference(Est, generic, hidden):
    reg, X = _fit(Est, module=Wrapped if generic else None, hidden_layer_sizes=hidden)
    mean_ref, cov_ref, J, Sigma = _dense_reference(reg, X)
    tol = _tol(J, Sigma)
    assert reg._forward.dense != generic
    y_mean, y_std = reg.predict(X, return_std=True)
    # the targets are standardised, so the network's outputs are in y's units
    np.testing.assert_allclose(y_mean, mean_ref[:, 0], rtol=0, atol=1e3 * EPS * np.abs(mean_ref).max())
    np.testing.assert_allclose(y_std**2, cov_ref[:, 0, 0] + reg.noise_std_**2, rtol=0, atol=tol)
    np.testing.assert_allclose(reg.predict_std(X), y_std, rtol=0, atol=0)
    # log_likelihood is the Gaussian density of those moments
    var = cov_ref[:, 0, 0] + reg.noise_std_**2
    y = np.linspace(-1, 1, X.shape[0])
    ref = np.mean(-0.5 * (y - mean_ref[:, 0]) ** 2 / var - 0.5 * np.log(2 * np.pi * var))
    assert abs(reg.log_likelihood(X, y) - ref) <= 1e-9 * abs(ref)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(("generic", "hidden"), PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("Est", CLASSIFIERS)
def test_classifier_moments_and_probit_equal_dense_jacobian_reference(Est, classes, generic, hidden):
    clf, X = _fit(Est, classes=classes, module=Wrapped if generic else None, hidden_layer_sizes=hidden)
    mean_ref, cov_ref, J, Sigma = _dense_reference(clf, X)
    mean, cov = clf._glm_moments(X)
    np.testing.assert_allclose(mean.numpy(), mean_ref, rtol=0, atol=1e3 * EPS * np.abs(mean_ref).max())
    np.testing.assert_allclose(cov.numpy(), cov_ref, rtol=0, atol=_tol(J, Sigma))
    # the probit approximations of the reference moments: MacKay's for one logit, of every
    # pairwise logit difference for several
    v = np.diagonal(cov_ref, axis1=1, axis2=2)
    if classes == 2:
        p1 = 1 / (1 + np.exp(-mean_ref[:, 0] / np.sqrt(1 + np.pi / 8 * v[:, 0])))
        ref = np.stack([1 - p1, p1], 1)
    else:
        s = v[:, :, None] + v[:, None, :] - 2 * cov_ref
        z = (mean_ref[:, :, None] - mean_ref[:, None, :]) / np.sqrt(1 + np.pi / 8 * s)
        ref = 1 / np.exp(-z).sum(2)
        ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(clf.predict_proba(X), ref, rtol=0, atol=1e-9)
    # glm_link='probit': each logit scaled by its own variance (two classes: MacKay's as before)
    clf.set_params(glm_link="probit")
    if classes > 2:
        z = mean_ref / np.sqrt(1 + np.pi / 8 * v)
        ref = np.exp(z - z.max(1, keepdims=True))
        ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(clf.predict_proba(X), ref, rtol=0, atol=1e-9)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("Est", [SLANGRegressor, NoisyKFACRegressor, BBBRegressor])
def test_linear_model_glm_predictive_is_the_exact_gaussian_predictive(Est):
    """With ``hidden_layer_sizes=()`` the network is linear in its weights, so the GLM
    predictive is the exact predictive of the Gaussian posterior: ``N(x~ mu, x~ Sigma x~^T
    + noise)`` with ``x~`` the input row with the bias' 1 (in ``module_.parameters()``
    order: weights, then bias); the sampled predictive converges to it."""
    reg, X = _fit(Est, hidden_layer_sizes=(), max_iter=5)
    Xt = np.hstack([X, np.ones((X.shape[0], 1))])
    Sigma, mu = reg.posterior_.covariance(), reg.posterior_.mean
    var = np.einsum("nd,de,ne->n", Xt, Sigma, Xt) + reg.noise_std_**2
    mean, std = reg.predict(X, return_std=True)
    np.testing.assert_allclose(mean, Xt @ mu, rtol=0, atol=100 * EPS * np.abs(Xt @ mu).max())
    np.testing.assert_allclose(std**2, var, rtol=1e3 * EPS)
    S = 20000
    reg.set_params(predictive="sampled", predict_samples=S)
    m_s, s_s = reg.predict(X, return_std=True)
    # Monte Carlo: the mean's error is about std/sqrt(S) (5 sigma), the variance's about var sqrt(2/S)
    assert np.all(np.abs(m_s - mean) <= 5 * std / math.sqrt(S))
    assert np.all(np.abs(s_s**2 - var) <= 5 * var * math.sqrt(2 / S))


def test_probit_against_monte_carlo_of_the_logits():
    """The probit approximations against 10^6 draws of Gaussian logits. MacKay's binary
    approximation is within 0.02 of the expectation (measured: up to 0.0103 here, logit
    variances up to about 15). The multi-class one sees the marginal variances only, not the
    correlations: within 0.02 at small variances (measured 0.007 for 3 classes at
    variances up to 0.1), but off by 0.15-0.2 at variances of 2 and more, where the
    'mc' link (draws of the logits) is exact up to Monte Carlo error."""
    gen = torch.Generator().manual_seed(0)
    S = 10**6
    for k, scale, bound in [(1, 2.0, 0.02), (3, 0.1, 0.02)]:
        mean = torch.randn(20, k, generator=gen, dtype=torch.float64) * 2
        A = scale * torch.randn(20, k, k, generator=gen, dtype=torch.float64)
        cov = A @ A.transpose(1, 2) + 0.01 * torch.eye(k, dtype=torch.float64)
        draws = _predictive.gaussian_draws(mean, cov, S, gen)  # (S, 20, k)
        if k == 1:
            p1 = torch.sigmoid(draws[..., 0]).mean(0)
            mc = torch.stack([1 - p1, p1], -1)
        else:
            mc = torch.softmax(draws, -1).mean(0)
        err = (_predictive.probit_proba(mean, cov) - mc).abs().max()
        assert float(err) <= bound, (k, float(err))
        # the draws themselves have the requested moments (5 Monte Carlo standard errors)
        sd = torch.sqrt(torch.diagonal(cov, dim1=1, dim2=2))
        assert torch.all((draws.mean(0) - mean).abs() <= 5 * sd / math.sqrt(S))
        emp = torch.einsum("snk,snl->nkl", draws - mean, draws - mean) / S
        assert torch.all((emp - cov).abs() <= 5 * math.sqrt(2 / S) * (sd[:, :, None] * sd[:, None, :]))


def test_pairwise_probit_is_shift_invariant_and_close_to_monte_carlo():
    """The pairwise approximation sees the logits through their differences: a variance
    shared by every logit (``c 1 1^T``) changes nothing, as for the softmax itself. Against
    10^6 draws at logit variances up to about 2 it is within 0.05 (measured 0.045 for 3
    classes, against 0.15 for the marginal-variance probit); two classes give MacKay's."""
    gen = torch.Generator().manual_seed(1)
    mean = torch.randn(20, 3, generator=gen, dtype=torch.float64) * 2
    A = 0.5 * torch.randn(20, 3, 3, generator=gen, dtype=torch.float64)
    cov = A @ A.transpose(1, 2) + 0.01 * torch.eye(3, dtype=torch.float64)
    p = _predictive.pairwise_probit_proba(mean, cov)
    shifted = _predictive.pairwise_probit_proba(mean + 3.0, cov + 5.0 * torch.ones(3, 3, dtype=torch.float64))
    torch.testing.assert_close(shifted, p, rtol=0, atol=1e3 * EPS)
    torch.testing.assert_close(p.sum(1), torch.ones(20, dtype=torch.float64), rtol=0, atol=10 * EPS)
    mc = torch.softmax(_predictive.gaussian_draws(mean, cov, 10**6, gen), -1).mean(0)
    assert float((p - mc).abs().max()) <= 0.05
    m1, c1 = mean[:, :1], cov[:, :1, :1]
    torch.testing.assert_close(_predictive.pairwise_probit_proba(m1, c1), _predictive.probit_proba(m1, c1))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_mc_link_is_the_average_softmax_of_the_logit_draws():
    clf, X = _fit(SLANGClassifier, classes=3, predict_samples=50)
    clf.set_params(glm_link="mc")
    mean, cov = clf._glm_moments(X)
    gen = torch.Generator().manual_seed(clf._predict_seed)
    draws = _predictive.gaussian_draws(mean, cov, 50, gen)
    np.testing.assert_allclose(clf.predict_proba(X), torch.softmax(draws, -1).mean(0).numpy(), rtol=1e-12)
    np.testing.assert_allclose(clf.sample_outputs(X), draws.numpy(), rtol=0, atol=0)
    # the link is read at prediction time: no refit, and the sampled predictive ignores it
    clf.set_params(glm_link="pairwise")
    pairwise = clf.predict_proba(X)
    assert np.abs(pairwise - torch.softmax(draws, -1).mean(0).numpy()).max() > 1e-3
    clf.set_params(predictive="sampled")
    sampled = clf.predict_proba(X)
    np.testing.assert_array_equal(clf.set_params(glm_link="mc").predict_proba(X), sampled)
    with pytest.raises(ValueError, match="glm_link"):
        clf.set_params(predictive="glm", glm_link="bridge").predict_proba(X)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("Est", [SLANGRegressor, NoisyEKFACClassifier])
def test_row_subset_invariance_determinism_and_chunking(Est, monkeypatch):
    est, X = _fit(Est, classes=None if Est is SLANGRegressor else 3)
    method = est.predict_std if Est is SLANGRegressor else est.predict_proba
    full = method(X)
    np.testing.assert_array_equal(method(X), full)  # deterministic
    np.testing.assert_allclose(method(X[5:9]), full[5:9], rtol=1e-12)  # rows do not interact
    monkeypatch.setattr(_predictive, "_BUDGET", 1)  # one row per chunk
    np.testing.assert_allclose(method(X), full, rtol=1e-12)
    draws = est.sample_outputs(X[:7], n_samples=4)
    assert draws.shape == (4, 7, est._likelihood.n_outputs)
    np.testing.assert_allclose(est.sample_outputs(X[2:4], n_samples=4), draws[:, 2:4], rtol=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_sample_y_follows_the_glm_predictive():
    reg, X = _fit(SLANGRegressor)
    draws = reg.sample_y(X[:3], n_samples=20000, random_state=1)
    mean, std = reg.predict(X[:3], return_std=True)
    assert draws.shape == (3, 20000)
    assert np.all(np.abs(draws.mean(1) - mean) <= 5 * std / math.sqrt(20000))
    assert np.all(np.abs(draws.std(1) / std - 1) <= 5 / math.sqrt(2 * 20000) + 0.01)


def test_invalid_predictive_is_rejected_and_dropout_has_none():
    X, y = _data(classes=2)
    with pytest.raises(InvalidParameterError, match="predictive must be"):
        SLANGClassifier(predictive="laplace", max_iter=1).fit(X, y)
    clf = SLANGClassifier(hidden_layer_sizes=(3,), max_iter=1, random_state=0).fit(X, y)
    clf.predictive = "bogus"  # set after fit: the prediction methods check it too
    with pytest.raises(InvalidParameterError, match="predictive must be"):
        clf.predict_proba(X)
    assert "predictive" not in MCDropoutClassifier().get_params()


_GLM_FAST = dict(hidden_layer_sizes=(5,), max_iter=5, predict_samples=10, random_state=0, predictive="glm")


@parametrize_with_checks(
    [SLANGRegressor(**_GLM_FAST), NoisyKFACClassifier(**_GLM_FAST), BBBClassifier(**_GLM_FAST)],
    expected_failed_checks=lambda est: {
        "check_sample_weight_equivalence_on_dense_data": "stochastic fits (see tests/test_sklearn_checks.py)"
    },
)
def test_sklearn_checks_with_the_glm_predictive(estimator, check):
    """scikit-learn's checks (subset invariance, dtypes, pickling...) with ``predictive='glm'``."""
    check(estimator)
