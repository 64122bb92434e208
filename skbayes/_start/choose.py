"""Which initialiser runs for ``init=...``, and the starting precision it gives.

:func:`initial_moments` dispatches on the estimator's ``init`` to i-BLM
(:mod:`.iblm`) or one of the baselines (:mod:`.baselines`); :func:`initial_precision`
turns the initialiser's factorised variances into the diagonal precision of a posterior
over all ``N`` training examples; :func:`diagnose` checks the input's scale for i-BLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..exceptions import UnsupportedLayerError, _warn
from . import iblm as _iblm_module
from .baselines import simple_init

if TYPE_CHECKING:
    from .._networks import NetworkForward
    from .iblm import NoiseVariance

INITS = ("iblm", "iblm_random", "default", "uninformative", "heuristic", "xavier", "orthogonal", "lsuv")


def initial_moments(
    kind: str,
    forward: NetworkForward,
    X: Tensor,
    y_enc: Tensor,
    gen: torch.Generator,
    prior_precision: float,
    *,
    batch_size: int,
    n_classes: int | None = None,
    centre_hidden: bool = False,
    weights: Tensor | None = None,
) -> tuple[Tensor, Tensor | None, NoiseVariance]:
    """``(mean, variance, noise_variance)`` of the initial posterior for ``init=kind``.

    ``variance`` is None for 'default'; ``noise_variance`` (regression with i-BLM only) is the
    output layer's estimate of the observation noise, otherwise None. ``weights``: the
    rows' sample weights (None without), scaled so that a regression on
    ``min(batch_size, n_rows)`` rows counts ``min(batch_size, sum of the sample weights)``
    observations in expectation (as a regression on that many duplicated rows would):
    i-BLM's regressions are then weighted least squares; the other initialisers do not
    look at the targets and ignore them (LSUV's output scales are unweighted).

    ``X`` (N, ...) and ``y_enc`` (N,) or (N, k) are the training tensors (targets in the
    likelihood's encoding), ``weights`` (N,); ``mean`` and ``variance`` are flat vectors (D,),
    ``noise_variance`` a float (one target) or an array (k,) (several).
    """
    layout, module = forward.layout, forward.module
    if kind == "default":
        return layout.flatten_module(module).clone(), None, None
    noise_variance: NoiseVariance = None
    try:
        if kind in ("iblm", "iblm_random"):
            mean, var, noise_variance = _iblm_module.iblm(
                forward,
                X,
                y_enc,
                gen,
                prior_precision,
                batch_size=batch_size,
                n_classes=n_classes,
                centre_hidden=centre_hidden,
                local=kind == "iblm",
                **({} if weights is None else {"weights": weights}),
            )
        else:
            mean, var = simple_init(forward, kind, X, gen, prior_precision, batch_size=batch_size)
    except torch.linalg.LinAlgError as exc:
        raise ValueError(
            f"init={kind!r} failed: a Bayesian linear regression of the initialisation is numerically "
            f"singular: {diagnose(X, prior_precision)}"
        ) from exc
    except UnsupportedLayerError as exc:
        _warn(
            f"init={kind!r} handles networks whose parameterised layers are nn.Linear / nn.Conv2d, so this "
            f"fit starts from init='default' instead; pass init='default' to choose it. ({exc})",
            UserWarning,
        )
        return layout.flatten_module(module).clone(), None, None
    if not (torch.isfinite(mean).all() and torch.isfinite(var).all() and (var > 0).all()):
        raise ValueError(f"init={kind!r} produced non-finite weights or variances: {diagnose(X, prior_precision)}")
    return mean, var, noise_variance


#: float64's resolution: a precision matrix whose data term exceeds its prior part by
#: more than ``1 / eps`` is singular to working precision when its inputs are collinear.
_RESOLUTION = 1.0 / torch.finfo(torch.float64).eps


def diagnose(X: Tensor, prior_precision: float) -> str:
    """The likely cause of a failed initialisation, and what to change, from the training
    inputs ``X`` (the tensor in the fit's dtype) and the prior precision.

    The regressions are solved in float64 (:mod:`.batched_blr`), so what remains is
    overflow in the fit's dtype (inputs beyond its range, or squared inputs whose sums
    exceed it: the precisions ``alpha + sum_b x_b^2 / v`` are cast back to that dtype) and a
    data term beyond float64's resolution relative to ``prior_precision``.
    """
    name = str(X.dtype).split(".")[-1]
    top = torch.finfo(X.dtype).max
    fixes = "standardise X (a StandardScaler in a Pipeline)"
    if not bool(torch.isfinite(X).all()):
        return f"X has values beyond the range of dtype={name!r} (which holds magnitudes up to {top:.3g}); {fixes}" + (
            ", or use dtype='float64'." if X.dtype != torch.float64 else "."
        )
    X64 = X.to(torch.float64).reshape(X.shape[0], -1)
    data = float((X64 * X64).sum(0).max()) if X64.numel() else 0.0
    lam = float(prior_precision)
    if not data < top:
        return (
            f"the sums of squared inputs that the regressions' precisions add up (up to {data:.3g} in a "
            f"column of X) overflow dtype={name!r} (largest {top:.3g}); {fixes}"
            + (", or use dtype='float64'" if X.dtype != torch.float64 else "")
            + ", or init='default'."
        )
    if data / lam > _RESOLUTION:
        return (
            f"the regressions' data term (sums of squared inputs up to {data:.3g} in a column of X) is "
            f"{data / lam:.3g} times prior_precision={lam:g}, beyond float64's resolution ({_RESOLUTION:.2g}), "
            f"so the precision matrices of nearly collinear inputs are singular; {fixes}, use a larger "
            "prior_precision, or init='default'."
        )
    return (
        f"the inputs of a layer are nearly collinear and prior_precision={lam:g} does not regularise their "
        "regression enough (the inputs' scale, sums of squares up to "
        f"{data:.3g} per column, is not the cause); use a larger prior_precision, or init='default'."
    )


@dataclass
class InitialPrecision:
    """The initialiser's diagonal precision, in the two forms the families start from.

    Attributes
    ----------
    total : Tensor of shape (D,)
        Precision of the initial posterior over all ``n_train`` examples (SLANG, VOGN,
        BBB start from it).
    per_example : Tensor of shape (D,)
        Its data part per training example, ``max(total - prior_precision, 0) / n_train``,
        computed from the initialiser's variances directly (Vadam/Vprop's ``s``).
    """

    total: Tensor
    per_example: Tensor


def initial_precision(
    var: Tensor | None, prior_precision: float, n_train: float, kind: str, batch_size: int
) -> InitialPrecision | None:
    """Diagonal precision of the initial posterior over all ``n_train`` examples (with
    sample weights, ``n_train`` is their sum, and the weights of i-BLM's regressions
    are scaled so that ``B`` rows stand for ``min(batch_size, n_train)`` examples).

    ``var`` None (``init='default'``, no initialiser variances): None, and each family
    starts from the prior plus one unit of curvature per training example,
    ``prior_precision + n_train`` (standard deviations of about ``1 / sqrt(N + prior)``),
    in its own parameterisation. i-BLM: its factorised precisions come from
    regressions on ``B = min(batch_size, n_train)`` rows, so their data part is
    rescaled to ``N`` rows: ``lam + max(1 / var - lam, 0) N / B``. Any other
    initialiser: ``1 / var``. Returns an :class:`InitialPrecision` (or None).
    """
    lam = float(prior_precision)
    if var is None:
        return None
    data = (1.0 / var - lam).clamp_min(0.0)
    if kind in ("iblm", "iblm_random"):
        B = min(int(batch_size), n_train)
        # a weight whose input is zero on every regression row (a ReLU unit dead at the
        # mean network) is not determined by the regressions: it starts as under
        # init='default', one unit of curvature per example, not at the prior
        # variance, which posterior samples that revive the unit would put on every row
        data = torch.where(data > 0, data, torch.full_like(data, float(B)))
        return InitialPrecision(total=lam + data * (n_train / B), per_example=data / B)
    return InitialPrecision(total=1.0 / var, per_example=data / n_train)
