"""The batched engine of dense networks (a ``Sequential`` of ``Linear`` layers and element-wise
activations): every weight sample in one batched forward pass, the tape of layer inputs and
activation outputs, and the backward pass written out with the operations autograd uses."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from .layout import ParamLayout

#: One ``Linear`` layer of a :class:`DenseSpec`: the weight's offset in the flat vector, its
#: outputs, its inputs, and the bias's offset (None without a bias).
LinearInfo = tuple[int, int, int, int | None]

#: One entry of a tape (:meth:`DenseSpec.forward_tape`, :meth:`DenseSpec.local_reparam_tape`),
#: tagged by its first element: ``("linear", A, W, has_bias)`` (the layer input ``A`` (S, n, in),
#: or (n, in) when shared by the samples, and the weights ``W`` (S, out, in)),
#: ``("act", module, input or None, output)``, ``("mask", m)`` (a dropout mask the input was
#: multiplied by); the local-reparameterisation tape's ``("linear", h, W_mean, W_var, sd, eps,
#: unclamped)``.
TapeEntry = tuple[Any, ...]

#: A function of a layer's input ``h`` (``layer_inputs`` / ``input_masks``).
LayerInputFn = Callable[[Tensor], Tensor]

# Parameter-free modules that act element-wise: they may sit between the
# Linear layers of a network that takes the fast dense-layer curvature path.
# Element-wise activations with an in-place torch function (used when nothing needs the input).
_IN_PLACE: dict[type[nn.Module], Callable[[Tensor], Tensor]] = {
    nn.ReLU: torch.relu_,
    nn.Tanh: torch.tanh_,
    nn.Sigmoid: torch.sigmoid_,
}

# Element-wise activations whose derivative follows from their output, by the functions
# autograd itself uses: the hand-written backward pass of :meth:`DenseSpec.backward`
# gives the same numbers as ``torch.autograd`` (others go through autograd there).
_ACT_BACKWARD: dict[type[nn.Module], Callable[[Tensor, Tensor], Tensor]] = {
    nn.ReLU: lambda g, out: torch.ops.aten.threshold_backward(g, out, 0),
    nn.Tanh: torch.ops.aten.tanh_backward,
    nn.Sigmoid: torch.ops.aten.sigmoid_backward,
    nn.Identity: lambda g, out: g,
}


#: Layers up to this many outputs compute a batch of weight samples' outputs as ``(W h^T)^T``,
#: wider ones as ``h W^T``. On one CPU thread (16 samples of 1,000 rows, float32) the first
#: order is faster for thin layers (100 -> 10 units: 1.0 against 1.7 ms; 50 -> 10 on 450 rows:
#: 0.16 against 0.51 ms) and level for wide ones.
_THIN = 64


def _act_backward(module: nn.Module, z: Tensor | None, out: Tensor, g: Tensor) -> Tensor:
    """Gradient with respect to the input ``z`` of an element-wise activation ``module``
    with output ``out``, given ``g`` with respect to its output (``z`` may be None for
    the activations of ``_ACT_BACKWARD``)."""
    fn = _ACT_BACKWARD.get(type(module))
    if fn is not None:
        return fn(g, out)
    assert z is not None  # recorded on the tape for every activation outside _ACT_BACKWARD
    with torch.enable_grad():
        zr = z.detach().requires_grad_(True)
        (dz,) = torch.autograd.grad(module(zr), zr, g)
    return dz


def materialise_delta(P: Tensor | None, d: Tensor | None, m: int, like: Tensor) -> Tensor:
    """Row ``j``'s ``P_j diag(d_j)`` for every row, (m, k, o), from an entry of
    :meth:`DenseSpec.output_deltas` (``P`` None: the identity, of the size of ``d``, or of
    ``like``'s last axis when ``d`` is None too; ``like`` gives the dtype and device)."""
    if P is None:
        if d is not None:
            return torch.diag_embed(d)
        k = like.shape[-1]
        return torch.eye(k, dtype=like.dtype, device=like.device).expand(m, k, k)
    if d is not None:
        return P * d[:, None, :]
    return P if P.dim() == 3 else P.expand(m, *P.shape)


_ELEMENTWISE = (
    nn.ReLU,
    nn.Tanh,
    nn.Sigmoid,
    nn.Identity,
    nn.ELU,
    nn.GELU,
    nn.Softplus,
    nn.LeakyReLU,
    nn.SiLU,
    nn.Mish,
    nn.Hardtanh,
    nn.ReLU6,
    nn.SELU,
    nn.CELU,
)


class DenseSpec:
    """A ``nn.Sequential`` of ``nn.Linear`` layers and element-wise activations.

    Such a network gets the fast curvature path: per-example gradients are never
    materialised; every product with them is a few matmuls with the layer inputs
    ``A`` and the back-propagated output gradients ``Delta``.

    Parameters
    ----------
    module : torch.nn.Sequential
        The network (:meth:`supports` it).
    layout : ParamLayout
        Where each parameter lives in the flat vector.

    Attributes
    ----------
    steps : list of tuple
        ``("linear", LinearInfo)`` or ``("act", module)``, one per child of ``module``.
    names : list of str
        The module name of every step.
    linears : list of LinearInfo
        ``(w_off, out, in, b_off)`` of every ``Linear`` layer, in order.
    """

    def __init__(self, module: nn.Sequential, layout: ParamLayout) -> None:
        # ("linear", LinearInfo) or ("act", module): Any, as the loops unpack them by tag
        self.steps: list[tuple[str, Any]] = []
        self.names: list[str] = []  # module name of every step
        pos = {n: (o, s) for n, s, o in zip(layout.names, layout.shapes, layout.offsets)}
        for idx, child in enumerate(module):
            self.names.append(str(idx))
            if isinstance(child, nn.Linear):
                w_off, w_shape = pos[f"{idx}.weight"]
                b_off = pos[f"{idx}.bias"][0] if child.bias is not None else None
                self.steps.append(("linear", (w_off, w_shape[0], w_shape[1], b_off)))
            else:
                self.steps.append(("act", child))
        self.linears: list[LinearInfo] = [s[1] for s in self.steps if s[0] == "linear"]

    @staticmethod
    def supports(module: nn.Module) -> TypeGuard[nn.Sequential]:
        """Whether ``module`` is a non-empty ``nn.Sequential`` of trainable ``nn.Linear`` layers
        and parameter-free element-wise activations."""
        if not isinstance(module, nn.Sequential) or len(module) == 0:
            return False
        for child in module:
            if isinstance(child, nn.Linear):
                if not child.weight.requires_grad or (child.bias is not None and not child.bias.requires_grad):
                    return False
            elif isinstance(child, _ELEMENTWISE):
                if any(True for _ in child.parameters()):
                    return False
            else:
                return False
        return True

    def forward(
        self,
        theta: Tensor,
        X: Tensor,
        layer_inputs: Mapping[str, LayerInputFn] | None = None,
        first_output: Tensor | None = None,
    ) -> Tensor:
        """Evaluate the network for weight samples ``theta`` (S, D) on rows ``X`` (n, in).

        Returns the outputs ``(S, n, out)``; a single weight vector ``theta`` (D,) gives
        outputs ``(n, out)``. ``layer_inputs``: ``{module name: fn}``, ``h -> fn(h)``
        applied to the input of those ``Linear`` layers (e.g. dropout masks). For
        training, :meth:`forward_tape` and :meth:`backward` give the gradients.
        ``first_output`` (S, n, out_1): the first step's output (it must be a ``Linear``
        layer), given instead of computed; the network runs from the step after it, and
        ``theta``'s entries of that layer are not read.
        """
        if theta.dim() == 1:
            return self._forward_one(theta, X, layer_inputs or {})
        h = X
        in_place = not torch.is_grad_enabled()
        steps = zip(self.names, self.steps)
        if first_output is not None:
            if self.steps[0][0] != "linear":
                raise ValueError("first_output needs a network whose first step is a Linear layer")
            h = first_output
            next(steps)
        for name, (kind, info) in steps:
            if kind == "act":
                # without autograd, overwrite a layer's own output (as nn.ReLU(inplace=True))
                h = _IN_PLACE[type(info)](h) if in_place and h is not X and type(info) in _IN_PLACE else info(h)
                continue
            if layer_inputs and name in layer_inputs:
                h = layer_inputs[name](h)
            w_off, out, inp, b_off = info
            W = theta[:, w_off : w_off + out * inp].reshape(-1, out, inp)
            if b_off is not None:  # bias fused into the batched GEMM, as nn.Linear's addmm
                hb = h if h.dim() == 3 else h.expand(theta.shape[0], *h.shape)
                if out <= _THIN:  # (W h^T)^T: the faster order for a thin layer (a transposed view)
                    h = torch.baddbmm(theta[:, b_off : b_off + out, None], W, hb.transpose(1, 2)).transpose(1, 2)
                else:
                    h = torch.baddbmm(theta[:, None, b_off : b_off + out], hb, W.transpose(1, 2))
            else:
                h = torch.matmul(h, W.transpose(1, 2))
        return h

    def forward_tape(
        self, theta: Tensor, X: Tensor, input_masks: Mapping[str, LayerInputFn] | None = None
    ) -> tuple[Tensor, list[TapeEntry]]:
        """Outputs ``(S, n, out)`` for weight samples ``theta`` (S, D) on rows ``X`` (n, in),
        without an autograd graph, and the tape :meth:`backward` reads.

        The tape holds, step by step, each ``Linear`` layer's input ``A_l`` (S, n, in_l)
        and weights, and each activation's output (and its input when the derivative
        needs it). :meth:`linear_inputs` returns the ``A_l``. ``input_masks``:
        ``{module name: fn}``, the input ``h`` of those ``Linear`` layers becomes
        ``h * fn(h)`` (e.g. dropout: ``fn`` draws the scaled keep mask).
        """
        S = theta.shape[0]
        h = X
        tape: list[TapeEntry] = []
        after_linear = False
        with torch.no_grad():
            for name, (kind, info) in zip(self.names, self.steps):
                if kind == "linear" and input_masks and name in input_masks:
                    m = input_masks[name](h)
                    h = h * m
                    tape.append(("mask", m))
                    after_linear = False
                if kind == "act":
                    cls = type(info)
                    if cls in _ACT_BACKWARD:
                        # a Linear layer's output is used by nothing else: overwrite it
                        out = _IN_PLACE[cls](h) if after_linear and cls in _IN_PLACE else info(h)
                        tape.append(("act", info, None, out))
                    else:
                        out = info(h)
                        tape.append(("act", info, h, out))
                    h, after_linear = out, False
                    continue
                w_off, out, inp, b_off = info
                W = theta[:, w_off : w_off + out * inp].reshape(-1, out, inp)
                if h.dim() == 2:
                    h = h.expand(S, *h.shape)
                if b_off is not None:
                    z = torch.baddbmm(theta[:, None, b_off : b_off + out], h, W.transpose(1, 2))
                else:
                    z = torch.matmul(h, W.transpose(1, 2))
                tape.append(("linear", h, W, b_off is not None))
                h, after_linear = z, True
        return h, tape

    @staticmethod
    def linear_inputs(tape: Sequence[TapeEntry]) -> list[Tensor]:
        """The inputs ``A_l`` (S, n, in_l) of the ``Linear`` layers recorded on a tape."""
        return [t[1] for t in tape if t[0] == "linear"]

    def backward(self, tape: Sequence[TapeEntry], grad_out: Tensor) -> list[Tensor]:
        """Back-propagate ``grad_out`` (S, n, out), the gradient of a loss with respect to
        the network outputs, through the network recorded on ``tape``.

        Returns the gradients with respect to every ``Linear`` layer's output, in layer
        order (the per-example ``Delta_l``, each (S, n, out_l)), computed with the operations autograd uses
        for the same network: the same numbers as ``torch.autograd.grad`` with respect to
        the pre-activations, without building a graph. Activations outside the few with
        a closed-form derivative (ReLU, tanh, sigmoid, identity) go through autograd.
        """
        deltas: list[Tensor] = []
        g = grad_out
        remaining = len(self.linears)
        for entry in reversed(tape):
            if entry[0] == "linear":
                deltas.append(g)
                remaining -= 1
                if remaining == 0:
                    break
                W = entry[2]
                g = torch.bmm(g, W) if entry[3] else torch.matmul(g, W)
                continue
            if entry[0] == "mask":
                g = g * entry[1]
                continue
            g = _act_backward(entry[1], entry[2], entry[3], g)
        deltas.reverse()
        return deltas

    def output_deltas(self, tape: Sequence[TapeEntry]) -> list[tuple[Tensor | None, Tensor | None]]:
        """The Jacobian of the network outputs with respect to every ``Linear`` layer's
        output, per row, from the tape of one weight vector (``forward_tape`` with S = 1)
        on ``m`` rows, in layer order and in factored form.

        Each layer's entry is a pair ``(P, d)``: row ``j``'s Jacobian (k outputs x out_l) is
        ``P_j diag(d_j)``. ``P`` is None (the identity: a last ``Linear`` layer that gives
        the outputs), a matrix (k, out_l) shared by every row, or one per row
        (m, k, out_l); ``d`` is None (ones) or the rows' column scales (m, out_l), the
        derivatives of the element-wise activations (and masks) since the last ``Linear``
        layer. :func:`materialise_delta` forms ``P_j diag(d_j)``. The same numbers as
        :meth:`backward` of the ``k`` unit output directions, with one matrix product
        per layer for all rows and directions.
        """
        deltas: list[tuple[Tensor | None, Tensor | None]] = []
        P: Tensor | None = None
        d: Tensor | None = None
        m = self.linear_inputs(tape)[0].shape[1]
        remaining = len(self.linears)
        for entry in reversed(tape):
            if entry[0] == "linear":
                deltas.append((P, d))
                remaining -= 1
                if remaining == 0:
                    break
                W = entry[2][0]  # (o, i)
                if P is None:
                    P = W if d is None else d[:, :, None] * W[None]  # diag(d_j) W
                else:
                    if d is not None:
                        P = P * d[:, None, :]
                    P = P @ W if P.dim() == 2 else (P.reshape(-1, P.shape[2]) @ W).view(m, P.shape[1], W.shape[1])
                d = None
                continue
            if entry[0] == "mask":
                e = entry[1][0].expand(m, -1)
            else:  # an element-wise activation: its derivative, row by row
                out = entry[3][0]
                e = _act_backward(entry[1], None if entry[2] is None else entry[2][0], out, torch.ones_like(out))
            d = e if d is None else d * e
        deltas.reverse()
        return deltas

    def weight_grads(self, tape: Sequence[TapeEntry], deltas: Sequence[Tensor], out: Tensor) -> Tensor:
        """Write ``sum_i dL_i/dtheta`` for every weight sample into ``out`` (S, D) (zeroed
        first), from the layer inputs on ``tape`` and the ``deltas`` of :meth:`backward`;
        the operations autograd uses for the batched GEMMs of :meth:`forward`. Returns ``out``."""
        out.zero_()
        for A, Dl, (w_off, o, i, b_off) in zip(self.linear_inputs(tape), deltas, self.linears):
            gW = torch.bmm(A.transpose(1, 2), Dl)  # (S, in, out): the gradient of W^T
            out[:, w_off : w_off + o * i].view(-1, o, i).copy_(gW.transpose(1, 2))
            if b_off is not None:
                out[:, b_off : b_off + o] = Dl.sum(1)
        return out

    def _forward_one(self, theta: Tensor, X: Tensor, layer_inputs: Mapping[str, LayerInputFn]) -> Tensor:
        """The outputs (n, out) of one weight vector ``theta`` (D,) on rows ``X`` (n, in)."""
        h = X
        for name, (kind, info) in zip(self.names, self.steps):
            if kind == "act":
                h = info(h)
                continue
            if name in layer_inputs:
                h = layer_inputs[name](h)
            w_off, out, inp, b_off = info
            h = h @ theta[w_off : w_off + out * inp].view(out, inp).T
            if b_off is not None:
                h = h + theta[b_off : b_off + out]
        return h

    def local_reparam(
        self, mean: Tensor, var: Tensor, X: Tensor, n_samples: int, generator: torch.Generator | None = None
    ) -> Tensor:
        """Network outputs ``(S, n, out)`` under the local reparameterisation trick.

        For every dense layer the pre-activations are sampled directly from their
        distribution given the layer input ``h`` under factorised weights with
        means ``mean`` and variances ``var`` (flat vectors (D,)) on rows ``X`` (n, in),
        ``z ~ N(h mu_W^T + mu_b, h^2 (sigma_W^2)^T + sigma_b^2)``, independently for
        every example and each of the ``S`` draws. Per example this is the same
        distribution of every layer's pre-activations as drawing one weight sample
        (so the expected loss and its gradient are the same), with less variance
        across examples. Differentiable in ``mean`` and ``var``; see
        :meth:`local_reparam_tape` for the hand-written gradient.
        """
        return self.local_reparam_tape(mean, var, X, n_samples, generator)[0]

    def local_reparam_tape(
        self, mean: Tensor, var: Tensor, X: Tensor, n_samples: int, generator: torch.Generator | None = None
    ) -> tuple[Tensor, list[TapeEntry]]:
        """:meth:`local_reparam`'s outputs (the same draws) and the tape
        :meth:`local_reparam_backward` reads."""
        h = X
        tape: list[TapeEntry] = []
        tiny = torch.finfo(mean.dtype).tiny
        for kind, info in self.steps:
            if kind == "act":
                out = info(h)
                tape.append(("act", info, h, out))
                h = out
                continue
            w_off, out, inp, b_off = info
            Wm = mean[w_off : w_off + out * inp].reshape(out, inp)
            Wv = var[w_off : w_off + out * inp].reshape(out, inp)
            zm = h @ Wm.T
            zv = (h * h) @ Wv.T
            if b_off is not None:
                zm = zm + mean[b_off : b_off + out]
                zv = zv + var[b_off : b_off + out]
            shape = (int(n_samples),) + tuple(zm.shape[-2:])
            eps = torch.randn(shape, generator=generator, dtype=zm.dtype, device=zm.device)
            sd = torch.sqrt(zv.clamp_min(tiny))
            tape.append(("linear", h, Wm, Wv, sd, eps, zv >= tiny))
            h = zm + sd * eps
        return h, tape

    def local_reparam_backward(
        self, tape: Sequence[TapeEntry], grad_out: Tensor, mean_grad: Tensor, var_grad: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Gradients of a loss with respect to ``mean`` and ``var`` of
        :meth:`local_reparam_tape`, given its gradient ``grad_out`` (S, n, out) with
        respect to the outputs; written into ``mean_grad`` and ``var_grad`` (D,), which are returned.

        Per layer, with ``z = z_m + sqrt(z_v) eps``: ``dz_m = dz``,
        ``dz_v = dz eps / (2 sqrt(z_v))`` (0 where ``z_v`` was clamped), then
        ``dW_m = sum dz_m^T h``, ``dW_v = sum dz_v^T h^2`` and
        ``dh = dz_m W_m + 2 h (dz_v W_v)`` for the layer below.
        """
        mean_grad.zero_()
        var_grad.zero_()
        g = grad_out
        remaining = list(self.linears)
        for entry in reversed(tape):
            if entry[0] == "act":
                g = _act_backward(entry[1], entry[2], entry[3], g)
                continue
            _, h, Wm, Wv, sd, eps, ok = entry
            w_off, o, i, b_off = remaining.pop()
            gv = torch.where(ok, g * eps / (2.0 * sd), 0.0)  # sqrt, then clamp_min's mask
            hh = h * h
            if h.dim() == 2:  # rows shared by the S draws (the first layer)
                gm2, gv2, h2, hh2 = g.sum(0), gv.sum(0), h, hh
            else:
                gm2, gv2, h2, hh2 = g.reshape(-1, o), gv.reshape(-1, o), h.reshape(-1, i), hh.reshape(-1, i)
            torch.mm(gm2.T, h2, out=mean_grad[w_off : w_off + o * i].view(o, i))
            torch.mm(gv2.T, hh2, out=var_grad[w_off : w_off + o * i].view(o, i))
            if b_off is not None:
                torch.sum(gm2, 0, out=mean_grad[b_off : b_off + o])
                torch.sum(gv2, 0, out=var_grad[b_off : b_off + o])
            if not remaining:
                break
            g = g @ Wm + 2.0 * h * (gv @ Wv)
        return mean_grad, var_grad
