"""Per-example gradients, in two interchangeable representations.

A *curvature batch* stands for the matrix ``G`` of shape ``(n, D)`` whose rows are
the per-example gradients ``g_i`` of the negative log-likelihood, one row per
(weight sample, example) pair, ``n = S * M``. Posterior updates only ever need

- ``grad_sum()``  ``sum_i g_i``                      (D,)
- ``sq_sum()``    ``sum_i g_i**2``                   (D,)  diagonal of ``G^T G``
- ``gram()``      ``G G^T``                          (n, n)
- ``project(U)``  ``G U``                            (n, L)
- ``combine(V)``  ``G^T V``                          (D, k)
- ``combine_into_(V, out, beta)``  ``out <- beta out + (G^T V)^T``  in place, ``out`` (k, D)
- ``dense()``     ``G`` itself                        (n, D)  (small problems only)

With sample weights the rows are ``sqrt(w_i) g_i``, so that every quadratic
quantity (``sq_sum``, ``gram``, ``G^T G``) weights an example by ``w_i`` once (as
``w_i`` duplicated rows would), and ``grad_sum()`` returns ``sum_i w_i g_i``
(the rows once more scaled by ``sqrt(w_i)``, kept as ``row_scale``).

:class:`GenericCurvature` holds ``G`` explicitly (``torch.func.vmap(grad)``,
any architecture). :class:`DenseCurvature` never forms it: for a dense layer
``g_i`` is the outer product ``delta_i a_i^T`` of the back-propagated output
gradient and the layer input, so every quantity above is a few matmuls with the
layer inputs ``A`` and output gradients ``Delta``
(``G G^T = sum_l (A_l A_l^T + 1) * (Delta_l Delta_l^T)`` and so on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import Tensor
from torch.func import functional_call, grad_and_value, vmap

from .._likelihoods import nll_grad

if TYPE_CHECKING:
    from torch import nn

    from .._networks import DenseSpec, NetworkForward, ParamLayout

#: One dense layer of a :class:`DenseCurvature`: inputs ``A`` (n, in), output gradients
#: ``Delta`` (n, out), the weight's offset in the flat vector, out, in, the bias's offset or None.
DenseLayerBatch = tuple[Tensor, Tensor, int, int, int, int | None]


class CurvatureBatch(Protocol):
    """What the posterior updates read of a batch of per-example gradients (module docstring)."""

    n: int
    D: int

    def grad_sum(self) -> Tensor: ...
    def sq_sum(self) -> Tensor: ...
    def gram(self) -> Tensor: ...
    def project(self, U: Tensor) -> Tensor: ...
    def combine(self, V: Tensor) -> Tensor: ...
    def combine_into_(self, V: Tensor, out: Tensor, beta: float = 1.0) -> Tensor: ...
    def dense(self) -> Tensor: ...


class GenericCurvature:
    """Curvature batch holding the per-example gradient matrix ``G`` (n, D).

    ``row_scale`` (n,): ``sqrt(w)`` of weighted rows (``G`` then holds ``sqrt(w_i) g_i``),
    applied once more by :meth:`grad_sum`; None without weights.
    """

    def __init__(self, G: Tensor, row_scale: Tensor | None = None) -> None:
        self.G = G
        self.n, self.D = G.shape
        self.row_scale = row_scale

    def grad_sum(self) -> Tensor:
        if self.row_scale is not None:
            return (self.G * self.row_scale[:, None]).sum(0)
        return self.G.sum(0)

    def sq_sum(self) -> Tensor:
        return (self.G * self.G).sum(0)

    def gram(self) -> Tensor:
        return self.G @ self.G.T

    def project(self, U: Tensor) -> Tensor:
        return self.G @ U

    def combine(self, V: Tensor) -> Tensor:
        return self.G.T @ V

    def combine_into_(self, V: Tensor, out: Tensor, beta: float = 1.0) -> Tensor:
        return out.addmm_(V.T, self.G, beta=beta)

    def dense(self) -> Tensor:
        return self.G


class DenseCurvature:
    """Curvature batch of a network of dense layers, from layer inputs and output gradients.

    Parameters
    ----------
    layers : list of tuples ``(A, Delta, w_off, out, inp, b_off)``
        ``A`` (n, inp) layer inputs, ``Delta`` (n, out) gradients of the summed
        negative log-likelihood with respect to the layer's pre-activations,
        ``w_off``/``b_off`` the offsets of the weight and bias (``None`` if the
        layer has no bias) in the flat parameter vector.
    D : int
        Length of the flat parameter vector.
    row_scale : Tensor of shape (n,), optional
        ``sqrt(w)`` of weighted rows (the ``Delta`` then hold ``sqrt(w_i) delta_i``),
        applied once more by :meth:`grad_sum`.
    """

    def __init__(self, layers: list[DenseLayerBatch], D: int, row_scale: Tensor | None = None) -> None:
        self.layers = layers
        self.D = D
        self.row_scale = row_scale
        self.n = layers[0][0].shape[0]
        ref = layers[0][0]
        self._dtype, self._device = ref.dtype, ref.device

    def _zeros(self, *shape: int) -> Tensor:
        return torch.zeros(*shape, dtype=self._dtype, device=self._device)

    def grad_sum(self) -> Tensor:
        out = self._zeros(self.D)
        for A, Dl, w_off, o, i, b_off in self.layers:
            if self.row_scale is not None:
                Dl = Dl * self.row_scale[:, None]
            out[w_off : w_off + o * i] = (Dl.T @ A).reshape(-1)
            if b_off is not None:
                out[b_off : b_off + o] = Dl.sum(0)
        return out

    def sq_sum(self) -> Tensor:
        out = self._zeros(self.D)
        for A, Dl, w_off, o, i, b_off in self.layers:
            D2 = Dl * Dl
            out[w_off : w_off + o * i] = (D2.T @ (A * A)).reshape(-1)
            if b_off is not None:
                out[b_off : b_off + o] = D2.sum(0)
        return out

    def gram(self) -> Tensor:
        K = self._zeros(self.n, self.n)
        for A, Dl, _w_off, _o, _i, b_off in self.layers:
            AA = A @ A.T
            if b_off is not None:
                AA = AA + 1.0
            K += AA * (Dl @ Dl.T)
        return K

    def project(self, U: Tensor) -> Tensor:
        # U is (D, L); its transpose is contiguous when U comes from a posterior
        # (factors are stored as (L, D) so each layer block is an (L, out, in) view).
        Ut = U.T
        L = Ut.shape[0]
        out = self._zeros(L, self.n)
        for A, Dl, w_off, o, i, b_off in self.layers:
            # (G_l U_l)[n, k] = sum_{o,i} Delta[n, o] U_k[o, i] A[n, i]
            T = torch.matmul(Ut[:, w_off : w_off + o * i].reshape(L, o, i), A.T)  # (L, o, n)
            DlT = Dl.T.contiguous()  # (o, n): the product below then runs on contiguous memory
            out += (T * DlT).sum(1)
            if b_off is not None:
                out.addmm_(Ut[:, b_off : b_off + o], DlT)
        return out.T

    def combine(self, V: Tensor) -> Tensor:
        # Returns a (D, k) view of a contiguous (k, D) tensor (see project).
        out = torch.empty(V.shape[1], self.D, dtype=self._dtype, device=self._device)
        return self.combine_into_(V, out, beta=0.0).T

    def combine_into_(self, V: Tensor, out: Tensor, beta: float = 1.0) -> Tensor:
        """``out <- beta * out + (G^T V)^T`` in place, for ``out`` a contiguous ``(k, D)`` tensor.

        Each layer block of ``out`` is a strided ``(k, out, in)`` view that one
        batched GEMM writes into: no ``D x k`` temporary is formed. With
        ``beta=0`` the old contents of ``out`` are ignored (may be uninitialised).
        """
        k = V.shape[1]
        Vt = V.T
        for A, Dl, w_off, o, i, b_off in self.layers:
            # (G_l^T V)[(o, i), k] = sum_n Delta[n, o] V[n, k] A[n, i]
            DV = Dl.T[None] * Vt[:, None, :]  # (k, o, n)
            out[:, w_off : w_off + o * i].unflatten(1, (o, i)).baddbmm_(DV, A.expand(k, *A.shape), beta=beta)
            if b_off is not None:
                out[:, b_off : b_off + o].addmm_(Vt, Dl, beta=beta)
        return out

    def dense(self) -> Tensor:
        G = self._zeros(self.n, self.D)
        for A, Dl, w_off, o, i, b_off in self.layers:
            G[:, w_off : w_off + o * i] = (Dl[:, :, None] * A[:, None, :]).reshape(self.n, o * i)
            if b_off is not None:
                G[:, b_off : b_off + o] = Dl
        return G


def dense_curvature(
    spec: DenseSpec,
    theta: Tensor,
    X: Tensor,
    y: Tensor,
    lik: Any,
    weights: Tensor | None = None,
    fisher: str = "empirical",
    generator: torch.Generator | None = None,
) -> tuple[CurvatureBatch, Tensor, Tensor]:
    """Per-example curvature of a :class:`~skbayes._networks.DenseSpec` network.

    Parameters
    ----------
    spec : DenseSpec
    theta : Tensor (S, D)
        Weight samples.
    X : Tensor (M, in)
    y : Tensor (M,) or (M, k)
        Targets in the likelihood's encoding.
    lik : Likelihood
        Gives the per-example negative log-likelihood ``lik.nll(f, y)``.
    weights : Tensor (M,), optional
        Sample weights (non-negative): the rows become ``sqrt(w_i) g_i`` (see the
        module docstring); ``nll`` stays unweighted.
    fisher : {'empirical', 'true'}, default='empirical'
        See :func:`per_example_curvature`. The true Fisher's targets are drawn from
        ``generator`` and back-propagated through the same forward pass.
    generator : torch.Generator, optional

    Returns
    -------
    curv : DenseCurvature, or SampledFisherCurvature with ``fisher='true'``
        Rows ordered sample-major (``s * M + i``).
    nll : Tensor (S, M), detached.
    f : Tensor (S, M, out), detached network outputs.
    """
    sw = None if weights is None else torch.sqrt(weights)
    f, tape = spec.forward_tape(theta, X)  # no autograd: the backward pass is written out
    nll, df = nll_grad(lik, f, y, sw)
    S, M = nll.shape
    As = [A.reshape(S * M, i) for A, (_, _, i, _) in zip(spec.linear_inputs(tape), spec.linears)]
    row_scale = None if sw is None else sw.repeat(S)

    def batch(output_grads: Tensor) -> DenseCurvature:
        deltas = spec.backward(tape, output_grads)
        layers = [
            (A, Dl.reshape(S * M, o), w_off, o, i, b_off)
            for A, Dl, (w_off, o, i, b_off) in zip(As, deltas, spec.linears)
        ]
        return DenseCurvature(layers, theta.shape[1], row_scale)

    observed = batch(df)
    if fisher != "true":
        return observed, nll, f
    sampled = batch(nll_grad(lik, f, lik.sample(f, generator), sw)[1])
    return SampledFisherCurvature(sampled, observed), nll, f


def generic_curvature(
    module: nn.Module, layout: ParamLayout, theta: Tensor, X: Tensor, y: Tensor, lik: Any, weights: Tensor | None = None
) -> tuple[GenericCurvature, Tensor, Tensor]:
    """Per-example gradients of any module by ``torch.func.vmap(grad)``.

    Same contract as :func:`dense_curvature`; materialises ``G`` (S*M, D).
    """

    def loss_one(params: dict[str, Tensor], x: Tensor, yi: Tensor) -> Tensor:
        out = functional_call(module, params, (x[None],))
        return lik.nll(out, yi[None])[0]

    def weighted_loss_one(params: dict[str, Tensor], x: Tensor, yi: Tensor, swi: Tensor) -> tuple[Tensor, Tensor]:
        nll = loss_one(params, x, yi)
        return nll * swi, nll

    sw = None if weights is None else torch.sqrt(weights)
    Gs, nlls, fs = [], [], []
    for s in range(theta.shape[0]):
        params = layout.unflatten(theta[s])
        with torch.enable_grad():
            if sw is None:
                g, v = vmap(grad_and_value(loss_one), in_dims=(None, 0, 0))(params, X, y)
            else:
                g, (_, v) = vmap(grad_and_value(weighted_loss_one, has_aux=True), in_dims=(None, 0, 0, 0))(
                    params, X, y, sw
                )
        Gs.append(torch.cat([g[n].reshape(X.shape[0], -1) for n in layout.names], dim=1))
        nlls.append(v)
        with torch.no_grad():
            fs.append(functional_call(module, params, (X,)))
    G = torch.cat(Gs, 0).detach()
    row_scale = None if sw is None else sw.repeat(theta.shape[0])
    return GenericCurvature(G, row_scale), torch.stack(nlls).detach(), torch.stack(fs).detach()


class SampledFisherCurvature:
    """The curvature rows of targets sampled from the model, with the gradient of the observed
    ones: :meth:`grad_sum` is ``observed``'s, every other quantity ``sampled``'s."""

    def __init__(self, sampled: CurvatureBatch, observed: CurvatureBatch) -> None:
        self.sampled, self.observed = sampled, observed
        self.n, self.D = sampled.n, sampled.D

    def grad_sum(self) -> Tensor:
        return self.observed.grad_sum()

    def sq_sum(self) -> Tensor:
        return self.sampled.sq_sum()

    def gram(self) -> Tensor:
        return self.sampled.gram()

    def project(self, U: Tensor) -> Tensor:
        return self.sampled.project(U)

    def combine(self, V: Tensor) -> Tensor:
        return self.sampled.combine(V)

    def combine_into_(self, V: Tensor, out: Tensor, beta: float = 1.0) -> Tensor:
        return self.sampled.combine_into_(V, out, beta=beta)

    def dense(self) -> Tensor:
        return self.sampled.dense()


def per_example_curvature(
    forward: NetworkForward,
    theta: Tensor,
    X: Tensor,
    y: Tensor,
    lik: Any,
    weights: Tensor | None = None,
    fisher: str = "empirical",
    generator: torch.Generator | None = None,
) -> tuple[CurvatureBatch, Tensor, Tensor]:
    """Per-example curvature at weight samples ``theta`` (S, D) through ``forward``
    (a :class:`~skbayes._networks.NetworkForward`): the dense-layer path when the
    network has one, else ``torch.func.vmap(grad)``. Same contract as :func:`dense_curvature`.

    ``fisher='empirical'``: the rows are the gradients at the observed targets ``y`` (the
    SLANG and VOGN papers' empirical Fisher). ``fisher='true'``: they are the gradients at
    targets drawn from the model at each sample's outputs (from ``generator``), whose squares
    are unbiased for the Fisher (for a Gaussian likelihood, the Gauss-Newton matrix), while
    ``grad_sum`` stays the observed targets' gradient; it costs a second pass. A row the
    network fits badly weighs in the empirical Fisher with its squared residual, so that the
    natural-gradient step on it shrinks as the residual grows; the true Fisher does not.
    """
    kw: dict[str, Any] = {} if weights is None else {"weights": weights}
    if forward.spec is not None:  # one forward pass, back-propagated once per set of targets
        true: dict[str, Any] = {"fisher": fisher, "generator": generator} if fisher == "true" else {}
        return dense_curvature(forward.spec, theta, X, y, lik, **kw, **true)
    observed, nll, f = generic_curvature(forward.module, forward.layout, theta, X, y, lik, **kw)
    if fisher != "true":
        return observed, nll, f
    if theta.shape[0] != 1:
        raise ValueError("fisher='true' draws one set of targets per weight sample: mc_samples must be 1.")
    targets = lik.sample(f, generator)[0]
    sampled, _, _ = generic_curvature(forward.module, forward.layout, theta, X, targets, lik, **kw)
    return SampledFisherCurvature(sampled, observed), nll, f
