"""The weight prior learned by empirical Bayes, against dense references."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from skbayes._prior import WeightPrior


def _linear_data(n=80, d=5, noise=0.3, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d)
    w = rng.randn(d) * np.array([2.0, 1.0, 0.5, 0.0, 0.0])[:d]
    y = X @ w + 0.7 + noise * rng.randn(n)
    return X, y


def _log_evidence(X1, y, lam, tau):
    """log N(y | 0, X1 diag(lam)^-1 X1^T + I / tau), the exact marginal likelihood."""
    C = X1 @ np.diag(1.0 / lam) @ X1.T + np.eye(len(y)) / tau
    sign, logdet = np.linalg.slogdet(C)
    return -0.5 * (logdet + y @ np.linalg.solve(C, y) + len(y) * np.log(2 * np.pi))


def test_em_fixed_point_is_the_type2_maximum_likelihood_of_a_linear_model():
    """Groups (weights, bias) of a Bayesian linear regression with known noise: iterating the
    M-step on the exact Gaussian posterior converges to the maximiser of the exact evidence."""
    X, y = _linear_data()
    tau = 1.0 / 0.3**2
    X1 = np.hstack([X, np.ones((len(y), 1))])
    d = X.shape[1]
    groups = [("w", torch.arange(d)), ("b", torch.tensor([d]))]
    prior = WeightPrior(groups, d + 1, "auto", hyperprior=(1.0, 0.0))  # plain type-II ML
    for _ in range(3000):
        lam = prior.vector().numpy()
        P = tau * X1.T @ X1 + np.diag(lam)
        S = np.linalg.inv(P)
        mu = S @ (tau * X1.T @ y)
        prior.update(torch.as_tensor(mu), torch.as_tensor(np.diag(S).copy()))
    lam_em = np.array(prior.values)

    def neg(loglam):
        return -_log_evidence(X1, y, np.r_[np.full(d, np.exp(loglam[0])), np.exp(loglam[1])], tau)

    res = minimize(neg, np.zeros(2), method="Nelder-Mead", options=dict(xatol=1e-10, fatol=1e-12, maxiter=5000))
    np.testing.assert_allclose(lam_em, np.exp(res.x), rtol=2e-3)
    # and the evidence at the EM fixed point is the maximum (no better point nearby)
    assert -neg(np.log(lam_em)) >= -res.fun - 1e-8


def test_update_formula_and_hyperprior():
    """lam_g = (n_g + 2 (a0 - 1)) / (E||theta_g||^2 + 2 b0), per group, clipped to the range."""
    mean = torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0], dtype=torch.float64)
    var = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5], dtype=torch.float64)
    groups = [("a", torch.tensor([0, 1, 2])), ("b", torch.tensor([3])), ("c", torch.tensor([4]))]
    prior = WeightPrior(groups, 5, "auto", hyperprior=(1.5, 0.5))
    assert prior.values == [1.0, 1.0, 1.0]
    prior.update(mean, var)
    second = (mean**2 + var).numpy()
    expect = [(3 + 1.0) / (second[:3].sum() + 1.0), (1 + 1.0) / (second[3] + 1.0), (1 + 1.0) / (second[4] + 1.0)]
    np.testing.assert_allclose(prior.values, expect, rtol=1e-12)
    np.testing.assert_allclose(prior.vector().numpy(), [expect[0]] * 3 + expect[1:], rtol=1e-12)
    # a collapsed group is clipped, not infinite
    p2 = WeightPrior([("all", torch.arange(5))], 5, "auto", hyperprior=(1.0, 0.0))
    p2.update(torch.zeros(5), torch.zeros(5))
    assert p2.values == [1e8]


def test_fixed_prior_never_changes_and_state_round_trips():
    prior = WeightPrior([("a", torch.arange(3)), ("b", torch.arange(3, 5))], 5, 2.5)
    prior.update(torch.ones(5), torch.ones(5))
    assert prior.is_scalar and prior.scalar() == 2.5 and prior.values == [2.5, 2.5]
    learned = WeightPrior([("a", torch.arange(3)), ("b", torch.arange(3, 5))], 5, "auto")
    state = learned.get_state()
    learned.update(torch.ones(5), torch.ones(5))
    assert learned.values != state
    learned.set_state(state)
    assert learned.values == state and torch.equal(learned.vector(), torch.ones(5, dtype=torch.float64))
    assert learned.as_dict() == {"a": 1.0, "b": 1.0}


@pytest.mark.parametrize("n_groups", [1, 3])
def test_groups_partition_the_vector(n_groups):
    idx = torch.randperm(12, generator=torch.Generator().manual_seed(0))
    groups = list(torch.tensor_split(idx, n_groups))
    prior = WeightPrior([(str(i), g) for i, g in enumerate(groups)], 12, "auto")
    prior.values = [float(i + 1) for i in range(n_groups)]
    prior._vector = None
    v = prior.vector()
    for i, g in enumerate(groups):
        assert torch.all(v[g] == i + 1)


# --- the estimators at their defaults ---------------------------------------------------------


@pytest.mark.parametrize("noise", [0.1, 1.0])
def test_learned_noise_recovers_low_and_high_noise_levels(quiet, noise):
    """The vague default noise prior lets the learned noise reach a low level too (a fixed
    Gamma(6, 6) on the standardised scale keeps it near 1 / sqrt(1 + 12 / N) std units)."""
    from skbayes import SLANGRegressor

    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (800, 2))
    f = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2
    y = f + noise * rng.randn(len(f))
    est = SLANGRegressor(hidden_layer_sizes=(30,), max_iter=150, random_state=0).fit(X, y)
    assert est.noise_std_ == pytest.approx(noise, rel=0.2)
    old = SLANGRegressor(hidden_layer_sizes=(30,), max_iter=150, noise_prior=(6.0, 6.0), random_state=0).fit(X, y)
    if noise < 0.5:  # the old prior holds the noise far above the truth on low-noise data
        assert old.noise_std_ > 1.3 * noise


def test_learned_prior_shrinks_weights_of_irrelevant_inputs(quiet):
    """18 of 20 inputs are noise: the learned first-layer precision exceeds the unit prior
    and the weights on the irrelevant inputs shrink (relative to the relevant ones)."""
    from skbayes import SLANGRegressor

    rng = np.random.RandomState(0)
    X = rng.randn(300, 20)
    y = 2.0 * X[:, 0] - 1.5 * X[:, 1] + 0.3 * rng.randn(300)
    kw = dict(hidden_layer_sizes=(), max_iter=100, kl_weight=1.0, random_state=0)  # the exact ELBO
    fixed = SLANGRegressor(prior_precision=1.0, **kw).fit(X, y)
    auto = SLANGRegressor(prior_precision="auto", **kw).fit(X, y)
    lam = auto.prior_precision_
    assert set(lam) == {"0.weight", "0.bias"}
    w_fixed, w_auto = fixed.posterior_.mean[:20], auto.posterior_.mean[:20]
    assert np.abs(w_auto[2:]).mean() < np.abs(w_fixed[2:]).mean()
    # the relevant weights stay (a linear model on standardised targets: about 0.8 and -0.6)
    np.testing.assert_allclose(w_auto[:2], w_fixed[:2], rtol=0.1)
    assert auto.score(X, y) >= fixed.score(X, y) - 0.01
