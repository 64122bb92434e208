"""i-BLM (Rossi, Michiardi and Filippone, ICML 2019): layer-wise Bayesian linear
regression, from the input upwards."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn
from torch.func import functional_call

from .._networks import ordered_layers
from .batched_blr import best_noise_variance, blr_solve, dirichlet_transform

if TYPE_CHECKING:
    from .._networks import KronLayer, NetworkForward, ParamLayout

#: i-BLM's estimate of the observation noise variance: a float (one target), an array
#: (k,) (one per target column), or None (classification, and the other initialisers).
NoiseVariance = float | NDArray[np.float64] | None

#: A local minibatch holds the ``min(B, P / 2)`` rows nearest to an anchor among a
#: random pool of ``P = min(N, _POOL * B)`` rows.
_POOL = 4


def layer_input(module: nn.Module, layout: ParamLayout, layer: KronLayer, theta: Tensor, X: Tensor) -> Tensor:
    """Input of ``layer`` when the network runs with flat weights ``theta`` (D,) on ``X`` (m, ...)."""
    box: list[Tensor] = []
    h = layer.module.register_forward_hook(lambda m, i, o: box.append(i[0].detach()))
    try:
        with torch.no_grad():
            functional_call(module, layout.unflatten(theta), (X,))
    finally:
        h.remove()
    return box[0]


def iblm_targets(y_enc: Tensor, n_classes: int | None, dtype: torch.dtype) -> tuple[Tensor, Tensor | None]:
    """Regression targets ``(N, K)`` and noise variances for i-BLM.

    Regression: the standardised targets (one column; the noise variance is
    chosen per layer by evidence maximisation, returned as None). Classification:
    the Dirichlet transform of the one-hot labels with ``alpha_eps = 0.01``; with
    two classes the single logit regresses on the difference of the two
    transformed columns (the log-odds), whose noise variance is the sum.
    """
    if n_classes is None:
        return (y_enc[:, None] if y_enc.dim() == 1 else y_enc), None
    k = int(n_classes)
    Y = torch.nn.functional.one_hot(y_enc.long(), max(k, 2)).to(dtype)
    T, V = dirichlet_transform(Y, 0.01)
    if k == 2:
        return (T[:, 1] - T[:, 0])[:, None], (V[:, 1] + V[:, 0])[:, None]
    return T, V


def _local_minibatches(
    module: nn.Module,
    layout: ParamLayout,
    layer: KronLayer,
    mean: Tensor,
    X: Tensor,
    n_groups: int,
    B: int,
    gen: torch.Generator,
) -> Tensor:
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
    width = int(np.prod(layer_input(module, layout, layer, mean, X[:1]).shape[1:]))
    # inputs are propagated at the (deterministic) mean: one pass over the training
    # set serves every pool when it fits in memory
    F_all = None
    if N * width <= (1 << 24) and n_groups * P > N:
        F_all = layer_input(module, layout, layer, mean, X).reshape(N, -1)
    chunk = max(1, (1 << 22) // max(1, P * width))
    out = []
    for g0 in range(0, n_groups, chunk):
        pg = pools[g0 : g0 + chunk]
        if F_all is not None:
            F = F_all[pg]
        else:
            F = layer_input(module, layout, layer, mean, X[pg.reshape(-1)]).reshape(pg.shape[0], P, -1)
        dist = ((F - F[:, :1]) ** 2).sum(-1)
        out.append(pg.gather(1, dist.topk(B, dim=1, largest=False).indices))
    return torch.cat(out, 0)


def iblm(
    forward: NetworkForward,
    X: Tensor,
    y_enc: Tensor,
    gen: torch.Generator,
    prior_precision: float,
    *,
    batch_size: int,
    n_classes: int | None = None,
    centre_hidden: bool = False,
    local: bool = True,
    weights: Tensor | None = None,
) -> tuple[Tensor, Tensor, NoiseVariance]:
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
    random minibatch, as in the paper (``local=False``: every layer, as in the
    paper, ``init='iblm_random'``). Hidden units regress on targets moved into their
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

    Parameters: ``forward`` the network (:class:`~skbayes._networks.NetworkForward`),
    ``X``, ``y_enc`` the training tensors (targets in the likelihood's encoding),
    ``batch_size`` the rows per regression, ``n_classes`` None for regression,
    ``centre_hidden`` whether hidden units regress on centred (not shifted) targets,
    ``weights`` None or the (positive) sample weights of the rows, rescaled to mean one:
    every regression is then weighted least squares (row ``b``'s noise variance divided
    by its weight, and the weighted evidence for the noise level), the minibatches are
    drawn as without weights, and centred targets use the weighted mean.

    Returns ``(mean, variance, noise_variance)``: flat tensors, and for regression the
    output layer's evidence-maximising noise variance (None for classification).
    """
    module, layout = forward.module, forward.layout
    layers = ordered_layers(module, layout, X)
    Yt, Vt = iblm_targets(y_enc, n_classes, X.dtype)
    N = X.shape[0]
    B = min(int(batch_size), N)
    mean = layout.flatten_module(module).clone()
    var = torch.full_like(mean, 1.0 / prior_precision)
    # Hidden units regress on targets moved into the activation's near-identity
    # regime, so that a layer passes the regression signal on: shifted to be
    # non-negative for ReLU-like activations, centred otherwise.
    if centre_hidden:
        if weights is None:
            Yc = Yt - Yt.mean(0, keepdim=True)
        else:
            Yc = Yt - (weights[:, None] * Yt).sum(0, keepdim=True) / weights.sum()
    else:
        Yc = Yt - Yt.min(0, keepdim=True).values
    v_layer: Any = None
    for li, layer in enumerate(layers):
        last = li == len(layers) - 1
        W, Pd, v_layer = _regress_layer(
            forward, layer, mean, X, Yt if last else Yc, Vt, weights, gen, prior_precision, B, local and not last
        )
        layer.mat_to_flat(W, mean)
        layer.mat_to_flat(1.0 / Pd, var)
    # the output layer's evidence-maximising noise variance (regression only; per target column)
    if isinstance(v_layer, torch.Tensor):
        v_layer = v_layer.double().cpu().numpy()
    return mean, var, v_layer


def _regress_layer(
    forward: NetworkForward,
    layer: KronLayer,
    mean: Tensor,
    X: Tensor,
    Yl: Tensor,
    Vt: Tensor | None,
    weights: Tensor | None,
    gen: torch.Generator,
    prior_precision: float,
    B: int,
    local_rows: bool,
) -> tuple[Tensor, Tensor, Any]:
    """i-BLM's regressions of one layer (see :func:`iblm`): every output unit regressed on its
    target column ``Yl`` (N, K) from the layer's inputs at the network's current ``mean``,
    on local minibatches (``local_rows``, hidden layers) or random ones of ``B`` rows.

    Returns ``(W, Pd, v_layer)``: the posterior means and the factorised precisions of the
    layer's weights, both ``(n, p)``, and the noise variance the regressions used (a float
    for one target column, a tensor (K,) for several; None with per-row variances ``Vt``).
    """
    module, layout = forward.module, forward.layout
    K = Yl.shape[1]
    N = X.shape[0]
    n_groups = math.ceil(layer.p / K)
    if local_rows:
        idx = _local_minibatches(module, layout, layer, mean, X, n_groups, B, gen)
        rows_g = torch.randperm(N, generator=gen, device=X.device)[:B]
        Ag = layer.patches(layer_input(module, layout, layer, mean, X[rows_g]))  # (B, T, n)
        Aglob_sq = (Ag * Ag).reshape(-1, layer.n)
        Vglob = None if Vt is None else Vt[rows_g].repeat_interleave(Ag.shape[1], 0)
        Wglob = None if weights is None else weights[rows_g].repeat_interleave(Ag.shape[1], 0)
    else:
        idx = torch.stack([torch.randperm(N, generator=gen, device=X.device)[:B] for _ in range(n_groups)])
    # None until estimated, then a float (one target column) or a tensor (K,); an array at the end
    v_layer: Any = None
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
        A_all = layer.patches(layer_input(module, layout, layer, mean, X))
    for g0 in range(0, n_groups, gchunk):
        gs = list(range(g0, min(g0 + gchunk, n_groups)))
        rows = idx[gs].reshape(-1)
        if A_all is not None:
            A = A_all[rows]
        else:
            A = layer.patches(layer_input(module, layout, layer, mean, X[rows]))  # (G B, T, n)
        T = A.shape[1]
        Xg = A.reshape(len(gs), Bg * T, layer.n)
        Yg = Yl[rows].reshape(len(gs), Bg, K).repeat_interleave(T, 1)  # (G, B T, K)
        Vg = None if Vt is None else Vt[rows].reshape(len(gs), Bg, K).repeat_interleave(T, 1)
        Wg = None if weights is None else weights[rows].reshape(len(gs), Bg).repeat_interleave(T, 1)
        if v_layer is None and Vt is None:
            # one noise level per target column (regression on several targets)
            kw = {} if Wg is None else {"weights": Wg[0]}
            v_cols = [best_noise_variance(Xg[0], Yg[0, :, c], prior_precision, **kw) for c in range(K)]
            v_layer = v_cols[0] if K == 1 else torch.tensor(v_cols, dtype=X.dtype, device=X.device)
        units = list(range(gs[0] * K, min((gs[-1] + 1) * K, layer.p)))
        gi = torch.tensor([j // K - gs[0] for j in units], device=X.device)
        ci = torch.tensor([j % K for j in units], device=X.device)
        Xb = Xg[gi]
        yb = Yg[gi, :, ci]
        vb = (v_layer if K == 1 else v_layer[ci][:, None]) if Vg is None else Vg[gi, :, ci]
        if Wg is None:
            m, pd = blr_solve(Xb, yb, prior_precision, vb)
        else:
            m, pd = blr_solve(Xb, yb, prior_precision, vb, weights=Wg[gi])
        if local_rows:
            # the mean from the local regression, the precision from the global minibatch
            vg = (v_layer if K == 1 else v_layer[ci][:, None]) if Vglob is None else Vglob[:, ci].T  # (units, B T)
            prec = 1.0 / torch.as_tensor(vg, dtype=W.dtype, device=W.device).expand(len(units), Aglob_sq.shape[0])
            if Wglob is not None:
                prec = prec * Wglob
            pd = prior_precision + prec @ Aglob_sq
        W[:, units[0] : units[-1] + 1] = m.T
        Pd[:, units[0] : units[-1] + 1] = pd.T
    return W, Pd, v_layer
