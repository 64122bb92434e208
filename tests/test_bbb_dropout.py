"""Bayes by Backprop and MC dropout: the math against references, the sklearn contract, real data."""

import math

import numpy as np
import pytest
import torch
from conftest import clf_data, reg_data, step_context
from sklearn.datasets import load_breast_cancer, load_diabetes, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn

from skbayes import BBBClassifier, BBBRegressor, MCDropoutClassifier, MCDropoutRegressor
from skbayes._families.base import adam_update
from skbayes.posteriors import DropoutPosterior, SoftplusGaussian
from skbayes.posteriors.bbb import diag_gaussian_kl, inverse_softplus

DT = torch.float64
REGRESSORS = [BBBRegressor, MCDropoutRegressor]
CLASSIFIERS = [BBBClassifier, MCDropoutClassifier]
FAST = dict(hidden_layer_sizes=(8,), max_iter=30, batch_size=32, predict_samples=20, random_state=0)


pytestmark = pytest.mark.usefixtures("quiet")  # short fits on purpose: no ConvergenceWarning noise


# --- Bayes by Backprop: the estimator of the gradient ------------------------------------------


def test_adam_update_matches_torch_optim_adam():
    g = torch.Generator().manual_seed(0)
    p0 = torch.randn(7, generator=g, dtype=DT)
    leaf = p0.clone().requires_grad_(True)
    opt = torch.optim.Adam([leaf], lr=0.03)
    ours, state = p0.clone(), {"step": 0, "p_m": torch.zeros(7, dtype=DT), "p_v": torch.zeros(7, dtype=DT)}
    for _ in range(5):
        grad = torch.randn(7, generator=g, dtype=DT) * 3.0
        leaf.grad = grad.clone()
        opt.step()
        state["step"] += 1
        ours = adam_update(ours, grad, state, "p", 0.03)
        torch.testing.assert_close(ours, leaf.detach(), rtol=1e-12, atol=1e-14)


def test_softplus_parameterisation_and_closed_form_kl_against_monte_carlo():
    g = torch.Generator().manual_seed(1)
    mu = torch.randn(5, generator=g, dtype=DT)
    sigma = torch.tensor([0.05, 0.3, 1.0, 2.0, 30.0], dtype=DT)
    rho = inverse_softplus(sigma)
    torch.testing.assert_close(torch.nn.functional.softplus(rho), sigma, rtol=1e-12, atol=0)
    q = SoftplusGaussian(mu, rho)
    lam = 0.7
    prior = torch.distributions.Normal(torch.zeros(5, dtype=DT), torch.full((5,), lam**-0.5, dtype=DT))
    ref = torch.distributions.kl_divergence(torch.distributions.Normal(mu, sigma), prior).sum()
    assert q.kl_to_prior(lam) == pytest.approx(float(ref), rel=1e-12)
    # Monte Carlo: E_q[log q(theta) - log p(theta)]
    theta = q.sample_t(400_000, generator=g)
    log_q = torch.distributions.Normal(mu, sigma).log_prob(theta).sum(1)
    log_p = prior.log_prob(theta).sum(1)
    diff = log_q - log_p
    se = float(diff.std()) / math.sqrt(diff.shape[0])
    assert abs(float(diff.mean()) - q.kl_to_prior(lam)) < 4 * se
    np.testing.assert_allclose(q.variance(), sigma.numpy() ** 2)
    np.testing.assert_allclose(q.covariance(), np.diag(sigma.numpy() ** 2))
    np.testing.assert_allclose(q.precision(), np.diag(sigma.numpy() ** -2.0))


def _grad_draws(est, mu0, rho0, Xb, yb, N, n_draws, seed, dense=True):
    """``n_draws`` independent one-sample gradient estimates of the negative ELBO w.r.t. (mu, rho)."""
    gen = torch.Generator().manual_seed(seed)
    family, ctx = step_context(est, gen, N, dense=dense)
    out = []
    for _ in range(n_draws):
        mu = mu0.clone().requires_grad_(True)
        rho = rho0.clone().requires_grad_(True)
        loss = family.neg_elbo_estimate(mu, rho, Xb, yb, ctx)[0]
        out.append(torch.cat(torch.autograd.grad(loss, (mu, rho))))
    return torch.stack(out)


def _assert_unbiased(draws, ref, z=4.5):
    mean = draws.mean(0)
    se = draws.std(0) / math.sqrt(draws.shape[0])
    bad = (mean - ref).abs() > z * se + 1e-9 * (1 + ref.abs())
    assert not bad.any(), (mean[bad], ref[bad], se[bad])


@pytest.mark.parametrize("local_reparam", [True, False])
def test_bbb_gradient_is_unbiased_for_the_closed_form_expectation(local_reparam):
    """Linear-Gaussian model: E_q[-log p] has a closed form, so has its gradient in (mu, rho)."""
    X, y = make_classification(n_samples=12, n_features=3, n_informative=3, n_redundant=0, random_state=0)
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.3
    est = BBBRegressor(
        hidden_layer_sizes=(),
        noise_precision=4.0,
        max_iter=1,
        local_reparam=local_reparam,
        mc_samples=1,
        kl_weight=0.5,
        random_state=0,
    ).fit(X, y)
    assert (est.local_reparam and est._forward.dense) == local_reparam
    Xb, yb = torch.as_tensor(X), torch.as_tensor(est._encode_targets(y))
    N, D = 40, 4
    g = torch.Generator().manual_seed(3)
    mu0 = torch.randn(D, generator=g, dtype=DT)
    rho0 = inverse_softplus(torch.tensor([0.2, 0.5, 0.8, 0.4], dtype=DT))
    tau = est._likelihood.noise.tau_mean
    # reference: (N/M) sum_i E_q[nll_i] + kl_weight * KL, E_q[(x~^T theta - y)^2] = (x~^T mu - y)^2 + sum x~^2 sigma^2
    mu, rho = mu0.clone().requires_grad_(True), rho0.clone().requires_grad_(True)
    Xt = torch.cat([Xb, torch.ones(len(Xb), 1, dtype=DT)], 1)
    s2 = torch.nn.functional.softplus(rho) ** 2
    e_sq = (Xt @ mu - yb) ** 2 + (Xt * Xt) @ s2
    e_nll = 0.5 * tau * e_sq - 0.5 * math.log(tau) + 0.5 * math.log(2 * math.pi)
    ref_loss = N / len(Xb) * e_nll.sum() + 0.5 * diag_gaussian_kl(mu, torch.nn.functional.softplus(rho), 1.0)
    ref = torch.cat(torch.autograd.grad(ref_loss, (mu, rho)))
    draws = _grad_draws(est, mu0, rho0, Xb, yb, N, 4000, seed=11)
    _assert_unbiased(draws, ref)
    # the test can tell: the rho part of the gradient is far from 0 relative to its error
    assert (ref[D:].abs() / (draws[:, D:].std(0) / math.sqrt(4000))).min() > 10


def test_local_reparameterisation_has_the_expected_gradient_of_weight_sampling():
    """A two-layer tanh classifier: the mean of one-sample LRT gradients, the mean of one-sample
    weight-sampling gradients (dense path and the generic torch.func path) and a 100 000-sample
    reference agree; LRT has the smaller variance over a minibatch."""
    X, y = make_classification(
        n_samples=10, n_features=2, n_informative=2, n_redundant=0, n_classes=3, n_clusters_per_class=1, random_state=2
    )
    kw = dict(hidden_layer_sizes=(3,), activation="tanh", max_iter=1, mc_samples=1, random_state=0)
    lrt = BBBClassifier(local_reparam=True, **kw).fit(X, y)
    ws = BBBClassifier(local_reparam=False, **kw).fit(X, y)
    Xb, yb = torch.as_tensor(X), torch.as_tensor(y)
    N, D = 30, lrt.posterior_.n_params
    g = torch.Generator().manual_seed(5)
    mu0 = torch.randn(D, generator=g, dtype=DT)
    rho0 = inverse_softplus(0.2 + 0.6 * torch.rand(D, generator=g, dtype=DT))
    # reference: S = 100 000 weight samples in one estimate
    ws.mc_samples = 100_000
    mu, rho = mu0.clone().requires_grad_(True), rho0.clone().requires_grad_(True)
    family, ctx = step_context(ws, g, N)
    ref = torch.cat(torch.autograd.grad(family.neg_elbo_estimate(mu, rho, Xb, yb, ctx)[0], (mu, rho)))
    ws.mc_samples = 1
    d_lrt = _grad_draws(lrt, mu0, rho0, Xb, yb, N, 3000, seed=21)
    d_ws = _grad_draws(ws, mu0, rho0, Xb, yb, N, 3000, seed=22)
    _assert_unbiased(d_lrt, ref)
    _assert_unbiased(d_ws, ref)
    assert d_lrt.var(0).sum() < d_ws.var(0).sum()
    # the generic (functional_call) path draws the same weights as the dense one
    d_gen = _grad_draws(ws, mu0, rho0, Xb, yb, N, 20, seed=22, dense=False)
    torch.testing.assert_close(d_gen, d_ws[:20], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("local_reparam", [True, False])
@pytest.mark.parametrize("task", ["clf3", "binary", "reg"])
@pytest.mark.parametrize("S", [1, 3])
def test_bbb_hand_written_gradient_equals_autograd(local_reparam, task, S):
    """The step's gradient (dense networks: the backward pass written out) against autograd
    of the estimate it differentiates, with the same draws: sample weights, a per-parameter
    prior, KL weight and annealing, tanh, ReLU and GELU layers, a layer without bias."""
    if task == "reg":
        X, y = reg_data(60, scale=True)
        est = BBBRegressor(hidden_layer_sizes=(6, 5), activation="tanh", max_iter=1, random_state=0)
    else:
        X, y = make_classification(
            60, 5, n_informative=4, n_redundant=0, n_classes=3 if task == "clf3" else 2, random_state=1
        )
        est = BBBClassifier(hidden_layer_sizes=(6,), max_iter=1, kl_weight=0.7, random_state=0)
        if task == "clf3":  # a layer without bias, an activation without a closed-form derivative
            layers = [nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 4, bias=False), nn.GELU(), nn.Linear(4, 3)]
            est.set_params(module=nn.Sequential(*layers).double())
    est.set_params(local_reparam=local_reparam, mc_samples=S).fit(X, y)
    Xb, yb = torch.as_tensor(X), torch.as_tensor(est._encode_targets(y))
    gen = torch.Generator().manual_seed(4)
    D = est.posterior_.n_params
    mu0 = torch.randn(D, generator=gen, dtype=DT)
    rho0 = inverse_softplus(0.05 + 0.5 * torch.rand(D, generator=gen, dtype=DT))
    weights = torch.rand(len(y), generator=gen, dtype=DT) * 2
    for w, prior in ((None, 1.3), (weights, 0.2 + torch.rand(D, generator=gen, dtype=DT))):
        family, ctx = step_context(est, torch.Generator().manual_seed(9), 500)
        ctx.weights, ctx.prior_precision, ctx.kl_scale = w, prior, 0.6
        assert ctx.forward.dense
        mu, rho = mu0.clone().requires_grad_(True), rho0.clone().requires_grad_(True)
        loss, data_ref, f_ref = family.neg_elbo_estimate(mu, rho, Xb, yb, ctx)
        ref = torch.autograd.grad(loss / 500, (mu, rho))
        ctx.generator = torch.Generator().manual_seed(9)  # the same draws
        g_mu, g_rho, data, f = family.neg_elbo_grad(mu0, rho0, Xb, yb, ctx)
        torch.testing.assert_close(f, f_ref.detach(), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(data, data_ref.detach(), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(g_mu, ref[0], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(g_rho, ref[1], rtol=1e-10, atol=1e-12)
        assert ref[1].abs().max() > 1e-3  # the rho part is not trivially zero


@pytest.mark.parametrize("S", [1, 3])
def test_bbb_gradient_of_any_module_equals_the_dense_one(S):
    """The autograd branch of the negative ELBO's gradient (any module) against the dense
    branch (the backward pass written out) with weight sampling: the same draws, the same
    gradient, data term and outputs, with sample weights and a per-parameter prior."""
    X, y = make_classification(40, 4, n_informative=3, n_redundant=0, n_classes=3, random_state=3)
    est = BBBClassifier(hidden_layer_sizes=(5,), activation="tanh", local_reparam=False, max_iter=1, random_state=0)
    est.set_params(mc_samples=S).fit(X, y)
    Xb, yb = torch.as_tensor(X), torch.as_tensor(est._encode_targets(y))
    gen = torch.Generator().manual_seed(2)
    D = est.posterior_.n_params
    mu = torch.randn(D, generator=gen, dtype=DT)
    rho = inverse_softplus(0.05 + 0.5 * torch.rand(D, generator=gen, dtype=DT))
    w, prior = torch.rand(len(y), generator=gen, dtype=DT) * 2, 0.2 + torch.rand(D, generator=gen, dtype=DT)
    out = []
    for dense in (True, False):
        family, ctx = step_context(est, torch.Generator().manual_seed(5), 200, dense=dense)
        ctx.weights, ctx.prior_precision, ctx.kl_scale = w, prior, 0.7
        assert ctx.forward.dense == dense
        out.append(family.neg_elbo_grad(mu, rho, Xb, yb, ctx))
    for a, b in zip(*out):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-13)
    assert not out[1][0].requires_grad and out[1][1].abs().max() > 1e-3


def test_bbb_initial_variances_and_step_bookkeeping(monkeypatch):
    X, y = reg_data(100, scale=True)
    est = BBBRegressor(
        hidden_layer_sizes=(4,),
        max_iter=1,
        batch_size=100,
        prior_precision=2.0,
        kl_weight=1.0,
        init="default",
        random_state=0,
    )
    est.fit(X, y)
    assert est.t_ == 1 and est._state["step"] == 1
    # one Adam step of size lr from sigma^2 = 1 / (N / kl_weight + lambda): every |change| of rho is about lr
    fresh = BBBRegressor(
        hidden_layer_sizes=(4,),
        max_iter=1,
        batch_size=100,
        prior_precision=2.0,
        kl_weight=1.0,
        init="default",
        random_state=0,
    )
    fresh.partial_fit(X, y)  # one epoch = one step
    rho_init = inverse_softplus(torch.full((est.posterior_.n_params,), (1 / 102.0) ** 0.5, dtype=DT)).numpy()
    np.testing.assert_allclose(np.abs(fresh.posterior_.rho - rho_init), 0.01, rtol=1e-3)
    # i-BLM: the regressions' variances on B = 50 rows, their data part rescaled to N = 100 rows
    # (an undetermined weight: one unit per example) and tempered by the KL weight, lambda = 1:
    # 1 / sigma^2 = 1 + data * (N / B) / kl_weight
    import skbayes._estimator

    start = skbayes._estimator.initial_moments
    seen = {}

    def spy(*args, **kwargs):
        out = start(*args, **kwargs)
        seen["var"] = out[1].clone()
        return out

    monkeypatch.setattr(skbayes._estimator, "initial_moments", spy)
    it = BBBRegressor(
        hidden_layer_sizes=(4,), max_iter=0, kl_weight=0.5, init="iblm", iblm_batch_size=50, random_state=0
    )
    it.fit(X, y)
    assert isinstance(it.posterior_, SoftplusGaussian)
    data = (1.0 / seen["var"] - 1.0).clamp_min(0.0)
    data = torch.where(data > 0, data, torch.full_like(data, 50.0))
    np.testing.assert_allclose(it.posterior_.sigma**2, (1.0 / (1.0 + data * 100 / 50 / 0.5)).numpy(), rtol=1e-10)


# --- MC dropout -------------------------------------------------------------------------------


def _dropout_net(**kw):
    X, y = reg_data(60, scale=True)
    return MCDropoutRegressor(hidden_layer_sizes=(5, 4), max_iter=2, random_state=0, **kw).fit(X, y), X


def test_masked_weight_distribution_mean_variance_and_covariance():
    est, _ = _dropout_net(dropout=0.3, input_dropout=0.2)
    post = est.posterior_
    assert isinstance(post, DropoutPosterior)
    assert [(m["name"], m["shape"], m["rate"]) for m in post.masked_layers] == [
        ("0", (5, 10), 0.2),
        ("2", (4, 5), 0.3),
        ("4", (1, 4), 0.3),
    ]
    theta = torch.as_tensor(post.sample(200_000, random_state=0))
    w = torch.as_tensor(post.mean)
    se = theta.std(0) / math.sqrt(theta.shape[0])
    assert torch.all((theta.mean(0) - w).abs() <= 4.5 * se + 1e-12)
    var = torch.as_tensor(post.variance())
    v_hat = theta.var(0)
    torch.testing.assert_close(v_hat, var, rtol=0.03, atol=1e-12)
    # the formula: W^2 p / (1 - p) on masked weights, 0 on biases
    for m in post.masked_layers:
        sl = slice(m["offset"], m["offset"] + m["shape"][0] * m["shape"][1])
        torch.testing.assert_close(var[sl], w[sl] ** 2 * m["rate"] / (1 - m["rate"]))
    biases = [o for n, o in zip(est._forward.layout.names, est._forward.layout.offsets) if n.endswith("bias")]
    assert all(var[o] == 0 for o in biases) and torch.all(theta[:, biases] == w[biases])
    # exact covariance against the empirical one; a column of a layer moves as one
    C = torch.as_tensor(post.covariance())
    C_hat = torch.cov(theta[:20_000].T)
    assert float((C - C_hat).abs().max()) < 0.05 * float(C.abs().max())
    m = post.masked_layers[1]
    W = theta[:, m["offset"] : m["offset"] + 20].view(-1, 4, 5)
    W0 = w[m["offset"] : m["offset"] + 20].view(4, 5)
    z = W / W0  # every entry of a column is W0 * 0 or W0 / (1 - p)
    assert torch.allclose(z, z[:, :1, :].expand_as(z))
    assert set(np.unique(np.round(z.numpy(), 8))) <= {0.0, round(1 / 0.7, 8)}
    with pytest.raises(NotImplementedError, match="not a Gaussian"):
        post.precision()
    # input_dropout=0 (the default): the first layer is a point estimate
    est0, _ = _dropout_net()
    assert [m["name"] for m in est0.posterior_.masked_layers] == ["2", "4"]


def test_weight_masks_are_dropout_on_the_hidden_units():
    """Prediction with masked weights equals the network with dropout masks on its hidden
    activations (the masks read back from the zeroed columns)."""
    est, X = _dropout_net(dropout=0.4)
    post, net = est.posterior_, est.module_
    Xt = torch.as_tensor(X)
    f = est._outputs(Xt, n_samples=5)
    gen = torch.Generator().manual_seed(est._predict_seed)
    theta = post.sample_t(5, generator=gen)
    W1, b1, W2, b2, W3, b3 = (torch.as_tensor(p.detach()) for p in net.parameters())
    for s in range(5):
        views = est._forward.layout.unflatten(theta[s])
        m2 = (views["2.weight"][0] != 0).to(DT)
        m3 = (views["4.weight"][0] != 0).to(DT)
        h = torch.relu(Xt @ W1.T + b1) * m2 / 0.6
        h = torch.relu(h @ W2.T + b2) * m3 / 0.6
        torch.testing.assert_close(f[s], h @ W3.T + b3, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(f[0], f[1])  # different masks, different networks


@pytest.mark.parametrize("Est,data", [(MCDropoutRegressor, reg_data), (MCDropoutClassifier, clf_data)])
@pytest.mark.parametrize("S", [1, 2])
def test_mc_dropout_step_written_out_equals_autograd(Est, data, S):
    """A training step on a dense network (the backward pass written out) against the same
    step through autograd and functional_call: the same masks, the same new weights."""
    import copy

    X, y = data()
    kw = dict(FAST, max_iter=2, dropout=0.3, input_dropout=0.2, mc_samples=S, activation="tanh")
    est = Est(**kw).fit(X, y)
    Xb, yb = torch.as_tensor(X[:40]), torch.as_tensor(est._encode_targets(y[:40]))
    w = torch.rand(40, generator=torch.Generator().manual_seed(0), dtype=DT) * 2
    means = []
    for dense in (True, False):
        family, ctx = step_context(est, torch.Generator().manual_seed(7), 300, dense=dense)
        ctx.weights, ctx.prior_precision = w, 0.8
        assert ctx.forward.dense == dense
        post, state = copy.deepcopy(est.posterior_), copy.deepcopy(est._state)
        res = family.step(post, state, Xb, yb, ctx)
        means.append((post.mean_t, res.data_term, state["w_m"]))
    torch.testing.assert_close(means[0][0], means[1][0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(means[0][2], means[1][2], rtol=1e-10, atol=1e-13)  # Adam's first moment: the gradient
    assert means[0][1] == pytest.approx(means[1][1], rel=1e-12)
    assert not torch.equal(means[0][0], est.posterior_.mean_t)  # the step moved the weights


@pytest.mark.parametrize("Est,data", [(MCDropoutRegressor, reg_data), (MCDropoutClassifier, clf_data)])
def test_mc_dropout_predictions_deterministic_and_row_independent(Est, data):
    X, y = data()
    est = Est(dropout=0.3, **FAST).fit(X, y)
    pred = (lambda Z: est.predict(Z, return_std=True)) if Est is MCDropoutRegressor else est.predict_proba
    ref = np.asarray(pred(X))
    rows = (lambda a, i: a[:, i]) if Est is MCDropoutRegressor else (lambda a, i: a[i])  # (mean, std) or proba
    np.testing.assert_array_equal(np.asarray(pred(X)), ref)
    idx = np.random.RandomState(0).permutation(len(X))
    for sub in (idx, idx[:17]):  # permuted rows, a subset
        np.testing.assert_allclose(np.asarray(pred(X[sub])), rows(ref, sub), rtol=1e-12, atol=1e-14)
    # the masks matter: the spread over masks is positive, and another seed gives other masks
    assert np.all(est.predict_std(X) > 0) if Est is MCDropoutRegressor else np.any(est.predict_std(X) > 0)
    f1 = est._predict_outputs(X, n_samples=3, seed=1)
    f2 = est._predict_outputs(X, n_samples=3, seed=2)
    assert not torch.allclose(f1, f2) and not torch.allclose(f1[0], f1[1])
    torch.testing.assert_close(f1, est._predict_outputs(X, n_samples=3, seed=1), rtol=0, atol=0)


def _conv(n_in, n_out):
    return nn.Sequential(
        nn.Unflatten(1, (1, 8, 8)),
        nn.Conv2d(1, 3, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(27, 6),
        nn.ReLU(),
        nn.Linear(6, n_out),
    )


def test_training_masks_are_per_example_and_match_prediction_masks():
    """Identical rows get different training masks; the training masks (dense path and the
    hook path of custom modules) have the distribution of the prediction masks."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X, y = X[:200] / 16.0, y[:200]
    for module in (None, _conv):
        kw = dict(hidden_layer_sizes=(6, 6), module=module, dropout=0.3, max_iter=1, random_state=0)
        est = MCDropoutClassifier(**kw).fit(X, y)
        if module is not None:
            assert not est._forward.dense and [m["name"] for m in est.posterior_.masked_layers] == ["5", "7"]
        row = torch.as_tensor(np.repeat(X[:1], 20_000, 0))
        theta = est.posterior_.mean_t
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            family, ctx = step_context(est, gen, len(row), mc_samples=1)
            f_train = family.train_outputs(est.posterior_, theta, row, ctx)[0]
        assert torch.unique(f_train[:, 0]).numel() > 10
        f_pred = est._outputs(row[:1], n_samples=20_000)[:, 0]
        se = (f_train.var(0) / 20_000 + f_pred.var(0) / 20_000).sqrt()
        assert torch.all((f_train.mean(0) - f_pred.mean(0)).abs() < 4.5 * se)
        torch.testing.assert_close(f_train.std(0), f_pred.std(0), rtol=0.05, atol=1e-9)


def test_custom_modules_bbb_fallback_and_dropout_layers_refused():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X, y = X[:300] / 16.0, y[:300]
    for Clf in CLASSIFIERS:
        clf = Clf(module=_conv, max_iter=40, batch_size=32, dtype="float32", predict_samples=10, random_state=0)
        clf.fit(X, y)
        assert clf.posterior_.mean.dtype == np.float32
        assert clf.score(X, y) > 0.8
    # weight sampling (not the local reparameterisation) for non-dense modules
    bbb = BBBClassifier(module=_conv, max_iter=1, batch_size=32, random_state=0).fit(X, y)
    assert bbb.local_reparam and not bbb._forward.dense
    with pytest.raises(ValueError, match="nn.Dropout"):
        MCDropoutClassifier(
            module=lambda i, o: nn.Sequential(nn.Linear(i, 5), nn.Dropout(0.5), nn.Linear(5, o)), max_iter=1
        ).fit(X, y)


# --- scikit-learn contract ----------------------------------------------------------------------

# scikit-learn's own checks run on these estimators in tests/test_sklearn_checks.py.


def test_bad_parameters_give_clear_errors():
    X, y = reg_data(scale=True)
    for Est, kw, msg in [
        (BBBRegressor, dict(kl_weight=0), "kl_weight"),
        (BBBRegressor, dict(local_reparam="yes"), "local_reparam"),
        (BBBRegressor, dict(learning_rate=0), "learning_rate"),
        (BBBRegressor, dict(prior_precision=-1), "prior_precision"),
        (MCDropoutRegressor, dict(dropout=1.0), "dropout"),
        (MCDropoutRegressor, dict(input_dropout=-0.1), "input_dropout"),
        (MCDropoutRegressor, dict(learning_rate=-1), "learning_rate"),
        (MCDropoutRegressor, dict(noise_precision=0.0), "noise_precision"),
    ]:
        with pytest.raises(ValueError, match=msg):
            Est(max_iter=1, **kw).fit(X, y)


@pytest.mark.parametrize("Clf", CLASSIFIERS)
def test_warm_start_and_early_stopping(Clf):
    X, y = make_classification(n_samples=300, n_features=5, random_state=1)
    est = Clf(warm_start=True, **FAST).fit(X, y)
    t1, steps1 = est.t_, est._state["step"]
    est.fit(X, y)  # continues: the optimiser's step count (Adam's bias correction) too
    assert est.t_ > t1 and est._state["step"] == est.t_ > steps1
    clf = Clf(hidden_layer_sizes=(16,), early_stopping=True, n_iter_no_change=3, max_iter=200, random_state=0)
    clf.fit(X, y)
    assert clf.n_iter_ < 200 and len(clf.validation_scores_) == clf.n_iter_
    assert clf.best_validation_score_ == pytest.approx(max(clf.validation_scores_))
    assert clf.score(X, y) > 0.85


def test_grid_search_parallel():
    X, y = load_diabetes(return_X_y=True)
    pipe = make_pipeline(StandardScaler(), BBBRegressor(**FAST))
    gs = GridSearchCV(
        pipe,
        {"bbbregressor__prior_precision": [0.1, 10.0], "bbbregressor__local_reparam": [True, False]},
        cv=2,
        n_jobs=2,
    ).fit(X[:150], y[:150])
    # every grid value reaches the estimator inside the pipeline: four different scores
    assert len(set(gs.cv_results_["mean_test_score"])) == 4 and gs.best_score_ > 0.1
    np.testing.assert_array_equal(gs.predict(X[:5]), gs.best_estimator_.predict(X[:5]))
    Xc, yc = clf_data(scale=True)
    gs = GridSearchCV(MCDropoutClassifier(**FAST), {"dropout": [0.05, 0.3]}, cv=2, n_jobs=2).fit(Xc, yc)
    means = gs.cv_results_["mean_test_score"]
    assert gs.best_params_["dropout"] == (0.05, 0.3)[int(np.argmax(means))] and gs.best_score_ > 0.8


# --- behaviour on real data ---------------------------------------------------------------------


@pytest.mark.parametrize("Clf", CLASSIFIERS)
def test_breast_cancer_accuracy_close_to_logistic_regression(Clf):
    X, y = load_breast_cancer(return_X_y=True)
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    acc_lr = cross_val_score(make_pipeline(StandardScaler(), LogisticRegression()), X, y, cv=cv).mean()
    acc = cross_val_score(make_pipeline(StandardScaler(), Clf(random_state=0)), X, y, cv=cv).mean()
    assert acc >= acc_lr - 0.02, (acc, acc_lr)


@pytest.mark.parametrize("Reg", REGRESSORS)
def test_diabetes_r2_and_noise(Reg):
    X, y = load_diabetes(return_X_y=True)
    r2 = cross_val_score(make_pipeline(StandardScaler(), Reg(random_state=0)), X, y, cv=3).mean()
    assert r2 > 0.35, r2  # linear models reach about 0.48
    reg = Reg(random_state=0).fit(StandardScaler().fit_transform(X), y)
    assert 40 < reg.noise_precision_**-0.5 < 70  # the residual std of a linear fit is about 54
