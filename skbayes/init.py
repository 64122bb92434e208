"""Initialisations of the variational posterior: i-BLM and the competitors of
Rossi, Michiardi and Filippone (ICML 2019).

Every initialiser returns the posterior mean and the KL-optimal factorised
variances (a flat vector each, ``module_.parameters()`` order); each posterior
family maps them into its own structure (see the family's ``_init_posterior``).
"""

import math
import warnings

import numpy as np
import torch
from torch.func import functional_call

from .blr import best_noise_variance, blr_solve, dirichlet_transform
from .kronecker import UnsupportedLayerError, kron_layers

INITS = ("iblm", "default", "uninformative", "heuristic", "xavier", "orthogonal", "lsuv")


def _ordered_layers(module, layout, X):
    """Linear/Conv2d blocks in the order a forward pass calls them."""
    layers = kron_layers(module, layout)
    order = []
    hooks = [l.module.register_forward_hook(lambda m, i, o, k=k: order.append(k)) for k, l in enumerate(layers)]
    try:
        with torch.no_grad():
            module(X[:1])
    finally:
        for h in hooks:
            h.remove()
    seen = []
    for k in order:
        if k not in seen:
            seen.append(k)
    return [layers[k] for k in seen]


def _layer_input(module, layout, layer, theta, X):
    """Input of ``layer`` when the network runs with flat weights ``theta`` on ``X``."""
    box = []
    h = layer.module.register_forward_hook(lambda m, i, o: box.append(i[0].detach()))
    try:
        with torch.no_grad():
            functional_call(module, layout.unflatten(theta), (X,))
    finally:
        h.remove()
    return box[0]


def _fan(layer):
    rf = layer.n_in // layer.module.weight.shape[1] if layer.is_conv else 1
    return layer.n_in, layer.p * rf


def iblm_targets(est, y_enc):
    """Regression targets ``(N, K)`` and noise variances for i-BLM.

    Regression: the standardised targets (one column; the noise variance is
    chosen per layer by evidence maximisation, returned as None). Classification:
    the Dirichlet transform of the one-hot labels with ``alpha_eps = 0.01``; with
    two classes the single logit regresses on the difference of the two
    transformed columns (the log-odds), whose noise variance is the sum.
    """
    if not getattr(est, "_is_classifier", False):
        return y_enc[:, None], None
    k = len(est.classes_)
    Y = torch.nn.functional.one_hot(y_enc.long(), max(k, 2)).to(est._dtype)
    T, V = dirichlet_transform(Y, 0.01)
    if k == 2:
        return (T[:, 1] - T[:, 0])[:, None], (V[:, 1] + V[:, 0])[:, None]
    return T, V


#: Hidden units regress on minibatches local in their layer's input space (see
#: :func:`iblm`); False gives the paper's random minibatches (kept for benchmarks).
_LOCAL = True
#: A local minibatch holds the ``min(B, P / 2)`` rows nearest to an anchor among a
#: random pool of ``P = min(N, _POOL * B)`` rows.
_POOL = 4


def _local_minibatches(module, layout, layer, mean, X, n_groups, B, gen):
    """One local minibatch per group of units, ``(n_groups, B_local)`` row indices.

    Each group draws a pool of ``P = min(N, 4 B)`` random rows and keeps the
    ``B_local = min(B, ceil(P / 2))`` whose layer inputs (at the current mean) are
    nearest to the pool's first row: at most half of the pool, so that the
    neighbourhood stays local when the training set has fewer than ``2 B`` rows.
    """
    N = X.shape[0]
    P = min(N, _POOL * B)
    B = min(B, max(1, math.ceil(P / 2)))
    pools = torch.stack([torch.randperm(N, generator=gen, device=X.device)[:P] for _ in range(n_groups)])
    if P <= B:  # a single row
        return pools[:, :B]
    width = int(np.prod(_layer_input(module, layout, layer, mean, X[:1]).shape[1:]))
    # inputs are propagated at the (deterministic) mean: one pass over the training
    # set serves every pool when it fits in memory
    F_all = None
    if N * width <= (1 << 24) and n_groups * P > N:
        F_all = _layer_input(module, layout, layer, mean, X).reshape(N, -1)
    chunk = max(1, (1 << 22) // max(1, P * width))
    out = []
    for g0 in range(0, n_groups, chunk):
        pg = pools[g0 : g0 + chunk]
        if F_all is not None:
            F = F_all[pg]
        else:
            F = _layer_input(module, layout, layer, mean, X[pg.reshape(-1)]).reshape(pg.shape[0], P, -1)
        dist = ((F - F[:, :1]) ** 2).sum(-1)
        out.append(pg.gather(1, dist.topk(B, dim=1, largest=False).indices))
    return torch.cat(out, 0)


def iblm(est, X, y_enc, gen, prior_precision):
    """Layer-wise Bayesian linear regression, from the input upwards (Algorithm 1).

    For layer ``l`` and output unit ``j``: draw a fresh minibatch of
    ``iblm_batch_size`` rows for every group of ``K`` units (``K`` target
    columns), propagate it through the layers below at their (already
    initialised) posterior mean, and regress unit ``j`` on target
    column ``j mod K`` (conv layers: every spatial patch is a row with its
    example's target).

    Hidden layers draw *local* minibatches: the ``min(B, P / 2)`` rows of a random
    pool of ``P = min(N, 4 B)`` whose layer inputs are nearest to the pool's first row. With one
    target column every hidden unit regresses on the same target; on random
    minibatches the units come out nearly identical (the same linear fit),
    the network starts as a linear model, and gradient steps cannot separate
    units that are symmetric. Local regressions give each unit the local
    trend of the target around its anchor, so the units differ and the
    stack starts as a piecewise fit (the paper's 1-D toy: held-out R^2 0.9
    right after initialisation instead of 0.06). Their factorised precisions
    come from a global random minibatch of the layer (``alpha + sum_b x_b^2 / v``
    with the unit's noise variance): a weight on a feature that is inactive
    in the unit's neighbourhood would otherwise keep the prior variance and
    make posterior samples wild elsewhere. The output layer regresses on a
    random minibatch, as in the paper. Hidden units regress on targets moved into their
    activation's near-identity regime (the paper's intuition: layers above one
    that already captures the task should start close to the identity): for
    ReLU-like activations (and user modules) the target column minus its
    minimum over the training set, so the unit is active on the data; for tanh,
    logistic and identity the centred column. Unshifted targets would switch
    off ReLU units: Dirichlet-transformed labels are all negative (about -0.3
    for the true class, -6.9 for the others) and standardised regression
    targets are negative half the time. The next layer's bias absorbs the
    offset; the output layer regresses on the targets themselves. The unit's weights get the
    posterior mean and the KL-optimal factorised variances ``1 / diag(precision)``.

    The paper propagates with a weight *sample*; we propagate with the mean.
    Hidden units of a layer are nearly collinear (they regress on the same
    targets), and the factorised variances, summed over many collinear inputs,
    put far more noise on the next layer's input than the full posterior does:
    the next layer's regression then fits noisy features whose mean (through a
    ReLU) is shifted, and the initialised mean network mispredicts (seen on
    diabetes with two hidden layers: output bias off by 0.8 standard deviations).
    With mean propagation the initial mean network is exactly the stack of
    regressions.

    Returns ``(mean, variance, noise_variance)``: flat tensors, and for regression the
    output layer's evidence-maximising noise variance (None for classification).
    """
    module, layout = est.module_, est._layout
    layers = _ordered_layers(module, layout, X)
    Yt, Vt = iblm_targets(est, y_enc)
    K = Yt.shape[1]
    N = X.shape[0]
    B = min(int(est.iblm_batch_size), N)
    mean = layout.flatten_module(module).clone()
    var = torch.full_like(mean, 1.0 / prior_precision)
    # Hidden units regress on targets moved into the activation's near-identity
    # regime, so that a layer passes the regression signal on: shifted to be
    # non-negative for ReLU-like activations, centred otherwise.
    if getattr(est, "module", None) is None and est.activation in ("tanh", "identity", "logistic", "sigmoid"):
        Yc = Yt - Yt.mean(0, keepdim=True)
    else:
        Yc = Yt - Yt.min(0, keepdim=True).values
    for li, layer in enumerate(layers):
        Yl = Yt if li == len(layers) - 1 else Yc
        n_groups = math.ceil(layer.p / K)
        local = li < len(layers) - 1 and _LOCAL
        if local:
            idx = _local_minibatches(module, layout, layer, mean, X, n_groups, B, gen)
            rows_g = torch.randperm(N, generator=gen, device=X.device)[:B]
            Ag = layer.patches(_layer_input(module, layout, layer, mean, X[rows_g]))  # (B, T, n)
            Aglob_sq = (Ag * Ag).reshape(-1, layer.n)
            Vglob = None if Vt is None else Vt[rows_g].repeat_interleave(Ag.shape[1], 0)
        else:
            idx = torch.stack([torch.randperm(N, generator=gen, device=X.device)[:B] for _ in range(n_groups)])
        v_layer = None
        W = torch.empty(layer.n, layer.p, dtype=mean.dtype, device=mean.device)
        Pd = torch.empty_like(W)
        # Groups share one forward pass at the mean; process as many at once as
        # keep the stacked design matrices at a few million entries.
        Bg = idx.shape[1]  # rows per group (a local minibatch can be smaller than B)
        per_group = Bg * layer.n * (layer.module.weight.shape[-1] * layer.module.weight.shape[-2] if layer.is_conv else 1)
        gchunk = max(1, (1 << 22) // max(1, per_group * K))
        # Inputs are propagated at the (deterministic) mean, so when the groups'
        # rows outnumber the training set, one pass over all rows is cheaper.
        A_all = None
        if n_groups * Bg > N and N * per_group // Bg <= (1 << 24):
            A_all = layer.patches(_layer_input(module, layout, layer, mean, X))
        for g0 in range(0, n_groups, gchunk):
            gs = list(range(g0, min(g0 + gchunk, n_groups)))
            rows = idx[gs].reshape(-1)
            if A_all is not None:
                A = A_all[rows]
            else:
                A = layer.patches(_layer_input(module, layout, layer, mean, X[rows]))  # (G B, T, n)
            T = A.shape[1]
            Xg = A.reshape(len(gs), Bg * T, layer.n)
            Yg = Yl[rows].reshape(len(gs), Bg, K).repeat_interleave(T, 1)  # (G, B T, K)
            Vg = None if Vt is None else Vt[rows].reshape(len(gs), Bg, K).repeat_interleave(T, 1)
            if v_layer is None and Vt is None:
                v_layer = best_noise_variance(Xg[0], Yg[0, :, 0], prior_precision)
            units = list(range(gs[0] * K, min((gs[-1] + 1) * K, layer.p)))
            gi = torch.tensor([j // K - gs[0] for j in units], device=X.device)
            ci = torch.tensor([j % K for j in units], device=X.device)
            Xb = Xg[gi]
            yb = Yg[gi, :, ci]
            vb = v_layer if Vt is None else Vg[gi, :, ci]
            m, pd = blr_solve(Xb, yb, prior_precision, vb)
            if local:
                # the mean from the local regression, the precision from the global minibatch
                vg = v_layer if Vt is None else Vglob[:, ci].T  # (units, B T)
                pd = prior_precision + (1.0 / torch.as_tensor(vg, dtype=W.dtype, device=W.device).expand(len(units), Aglob_sq.shape[0])) @ Aglob_sq
            W[:, units[0] : units[-1] + 1] = m.T
            Pd[:, units[0] : units[-1] + 1] = pd.T
        layer.mat_to_flat(W, mean)
        layer.mat_to_flat(1.0 / Pd, var)
    # the output layer's evidence-maximising noise variance (regression only)
    return mean, var, v_layer


def simple_init(est, kind, X, gen, prior_precision):
    """The competing initialisations (mean, variance) of the i-BLM paper."""
    module, layout = est.module_, est._layout
    layers = _ordered_layers(module, layout, X)
    mean = layout.flatten_module(module).clone()
    var = torch.full_like(mean, 1.0 / prior_precision)
    if kind == "uninformative":  # q = prior
        return torch.zeros_like(mean), var
    for layer in layers:
        fan_in, fan_out = _fan(layer)
        W = torch.zeros(layer.n, layer.p, dtype=mean.dtype, device=mean.device)
        v = 2.0 / (fan_in + fan_out) if kind == "xavier" else 1.0 / fan_in
        if kind in ("orthogonal", "lsuv"):
            w = torch.empty(layer.p, layer.n_in, dtype=mean.dtype, device=mean.device)
            torch.nn.init.orthogonal_(w, generator=gen)
            W[: layer.n_in] = w.T
        layer.mat_to_flat(W, mean)
        layer.mat_to_flat(torch.full_like(W, v), var)
    if kind == "lsuv":
        # Mishkin & Matas: rescale each layer's weights so that its output has unit
        # variance on a minibatch, from the input upwards.
        idx = torch.randperm(X.shape[0], generator=gen, device=X.device)[: min(int(est.iblm_batch_size), X.shape[0])]
        for layer in layers:
            A = layer.patches(_layer_input(module, layout, layer, mean, X[idx]))
            out = A.reshape(-1, layer.n) @ layer.flat_to_mat(mean)
            sd = float(out.std())
            if sd > 0:
                W = layer.flat_to_mat(mean) / sd
                layer.mat_to_flat(W, mean)
    return mean, var


def initial_moments(est, X, y_enc, gen, prior_precision):
    """``(mean, variance, noise_variance)`` of the initial posterior for ``est.init``.

    ``variance`` is None for 'default'; ``noise_variance`` (regression with i-BLM only) is the
    output layer's estimate of the observation noise, otherwise None.
    """
    kind = est.init
    if kind == "default":
        return est._layout.flatten_module(est.module_).clone(), None, None
    noise_variance = None
    try:
        if kind == "iblm":
            mean, var, noise_variance = iblm(est, X, y_enc, gen, prior_precision)
        else:
            mean, var = simple_init(est, kind, X, gen, prior_precision)
    except torch.linalg.LinAlgError as exc:
        raise ValueError(
            f"init={kind!r} failed: a Bayesian linear regression of the initialisation is numerically "
            "singular, which happens with badly scaled inputs; standardise X (e.g. StandardScaler) or "
            "use init='default'."
        ) from exc
    except UnsupportedLayerError as exc:
        warnings.warn(
            f"init={kind!r} handles networks whose parameterised layers are nn.Linear / nn.Conv2d; "
            f"falling back to init='default' ({exc})",
            UserWarning,
        )
        return est._layout.flatten_module(est.module_).clone(), None, None
    if not (torch.isfinite(mean).all() and torch.isfinite(var).all() and (var > 0).all()):
        raise ValueError(
            f"init={kind!r} produced non-finite weights (badly scaled inputs?); standardise X or use "
            "init='default'."
        )
    return mean, var, noise_variance
