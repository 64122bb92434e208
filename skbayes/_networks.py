"""Networks: the MLP built from ``hidden_layer_sizes``, user modules, the flat
parameter vector <-> module views, the forward path (network + parameter vector ->
outputs) used by every family and by prediction, and the per-layer geometry of
``Linear`` / ``Conv2d`` layers that the Kronecker families and i-BLM work with."""

import copy
import math
import threading

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from .exceptions import UnsupportedLayerError

ACTIVATIONS = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "logistic": nn.Sigmoid,
    "sigmoid": nn.Sigmoid,
    "identity": nn.Identity,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "softplus": nn.Softplus,
    "leaky_relu": nn.LeakyReLU,
}

# Parameter-free modules that act element-wise: they may sit between the
# Linear layers of a network that takes the fast dense-layer curvature path.
# Element-wise activations with an in-place torch function (used when nothing needs the input).
_IN_PLACE = {nn.ReLU: torch.relu_, nn.Tanh: torch.tanh_, nn.Sigmoid: torch.sigmoid_}

# Element-wise activations whose derivative follows from their output, by the functions
# autograd itself uses: the hand-written backward pass of :meth:`DenseSpec.backward`
# gives the same numbers as ``torch.autograd`` (others go through autograd there).
_ACT_BACKWARD = {
    nn.ReLU: lambda g, out: torch.ops.aten.threshold_backward(g, out, 0),
    nn.Tanh: torch.ops.aten.tanh_backward,
    nn.Sigmoid: torch.ops.aten.sigmoid_backward,
    nn.Identity: lambda g, out: g,
}


def _act_backward(module, z, out, g):
    """Gradient with respect to the input ``z`` of an element-wise activation ``module``
    with output ``out``, given ``g`` with respect to its output (``z`` may be None for
    the activations of ``_ACT_BACKWARD``)."""
    fn = _ACT_BACKWARD.get(type(module))
    if fn is not None:
        return fn(g, out)
    with torch.enable_grad():
        zr = z.detach().requires_grad_(True)
        (dz,) = torch.autograd.grad(module(zr), zr, g)
    return dz


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


def build_mlp(n_in, hidden_layer_sizes, n_out, activation="relu", *, generator=None, dtype=None):
    """A fully connected network ``n_in -> hidden... -> n_out`` (no final activation).

    With a ``generator`` the layers are built without drawing from torch's global
    random state (on the meta device) and then initialised from ``generator`` by
    :func:`init_layers` with PyTorch's own scheme, on the CPU in ``dtype`` (default:
    torch's default dtype): the weights depend on the generator only. Without one,
    ``nn.Linear`` initialises itself from the global random state.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r} is not supported; choose one of {sorted(ACTIVATIONS)}.")
    kw = {} if generator is None else {"device": "meta", "dtype": dtype}
    layers = []
    prev = n_in
    for h in hidden_layer_sizes:
        layers.append(nn.Linear(prev, int(h), **kw))
        layers.append(ACTIVATIONS[activation]())
        prev = int(h)
    layers.append(nn.Linear(prev, n_out, **kw))
    net = nn.Sequential(*layers)
    if generator is not None:
        net = net.to_empty(device="cpu")
        init_layers(net, generator)
    return net


#: Layers whose ``reset_parameters`` is PyTorch's default scheme, which
#: :func:`init_layers` reproduces from a generator.
_KAIMING_LAYERS = (nn.Linear, nn.modules.conv._ConvNd)


def init_layers(module, generator):
    """Initialise every ``nn.Linear`` and convolution layer of ``module`` in place from
    ``generator``, by PyTorch's default scheme (``reset_parameters``: Kaiming-uniform
    weights with ``a = sqrt(5)``, i.e. ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, and biases
    on the same bound), layer by layer in ``module.modules()`` order, weight before bias.

    This is what constructing the layers under ``torch.manual_seed(s)`` gives, drawn
    from ``generator`` (seeded with ``s``) instead of torch's global random state.
    Other layers are left as they are.
    """
    with torch.no_grad():
        for m in module.modules():
            if not isinstance(m, _KAIMING_LAYERS):
                continue
            w = m.weight
            if w.is_contiguous() and w.device == generator.device:
                nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=generator)
            else:  # as _ConvNd.reset_parameters: draw into a contiguous buffer (on the generator's device)
                tmp = torch.empty(w.shape, dtype=w.dtype, device=generator.device)
                nn.init.kaiming_uniform_(tmp, a=math.sqrt(5), generator=generator)
                w.copy_(tmp)
            if m.bias is not None:
                fan_in, _ = nn.init._calculate_fan_in_and_fan_out(w)
                bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
                b = m.bias if m.bias.device == generator.device else torch.empty_like(m.bias, device=generator.device)
                nn.init.uniform_(b, -bound, bound, generator=generator)
                if b is not m.bias:
                    m.bias.copy_(b)
    return module


def make_module(module, n_in, n_out):
    """Instantiate the user's ``module`` parameter.

    ``module`` is either a callable ``module(n_features_in, n_outputs)`` returning
    a :class:`torch.nn.Module` (a class or a function), or a ready module instance,
    which is deep-copied so that the user's object is never modified.
    """
    if isinstance(module, nn.Module):
        net = copy.deepcopy(module)
    elif callable(module):
        net = module(n_in, n_out)
    else:
        raise TypeError(
            "module must be a torch.nn.Module or a callable (n_features_in, n_outputs) -> Module, "
            f"got {type(module).__name__}."
        )
    if not isinstance(net, nn.Module):
        raise TypeError(f"module(...) must return a torch.nn.Module, got {type(net).__name__}.")
    if not any(p.requires_grad for p in net.parameters()):
        raise ValueError("module has no trainable parameters.")
    return net


class ParamLayout:
    """Where each parameter of a module lives in the flat vector.

    The flat vector follows ``module.parameters()`` order, each tensor flattened
    in row-major order (for ``nn.Linear``: the ``(out, in)`` weight, then the bias).
    """

    def __init__(self, module):
        self.names = []
        self.shapes = []
        self.offsets = []
        off = 0
        for name, p in module.named_parameters():
            if not p.requires_grad:
                continue
            self.names.append(name)
            self.shapes.append(tuple(p.shape))
            self.offsets.append(off)
            off += p.numel()
        self.size = off

    def unflatten(self, theta):
        """Dict name -> view of ``theta`` (shape ``(..., D)``) with the parameter's shape."""
        lead = theta.shape[:-1]
        out = {}
        for name, shape, off in zip(self.names, self.shapes, self.offsets):
            n = 1
            for s in shape:
                n *= s
            out[name] = theta[..., off : off + n].reshape(*lead, *shape)
        return out

    def flatten_module(self, module):
        params = dict(module.named_parameters())
        return torch.cat([params[n].detach().reshape(-1) for n in self.names])

    def load_into(self, module, theta):
        params = dict(module.named_parameters())
        views = self.unflatten(theta)
        with torch.no_grad():
            for n in self.names:
                params[n].copy_(views[n])


class DenseSpec:
    """A ``nn.Sequential`` of ``nn.Linear`` layers and element-wise activations.

    Such a network gets the fast curvature path: per-example gradients are never
    materialised; every product with them is a few matmuls with the layer inputs
    ``A`` and the back-propagated output gradients ``Delta``.
    """

    def __init__(self, module, layout):
        self.steps = []  # ("linear", info) or ("act", module)
        self.names = []  # module name of every step
        pos = {n: (o, s) for n, s, o in zip(layout.names, layout.shapes, layout.offsets)}
        for idx, child in enumerate(module):
            self.names.append(str(idx))
            if isinstance(child, nn.Linear):
                w_off, w_shape = pos[f"{idx}.weight"]
                b_off = pos[f"{idx}.bias"][0] if child.bias is not None else None
                self.steps.append(("linear", (w_off, w_shape[0], w_shape[1], b_off)))
            else:
                self.steps.append(("act", child))
        self.linears = [s[1] for s in self.steps if s[0] == "linear"]

    @staticmethod
    def supports(module):
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

    def forward(self, theta, X, layer_inputs=None):
        """Evaluate the network for weight samples ``theta`` (S, D) on rows ``X`` (n, in).

        Returns the outputs ``(S, n, out)``; a single weight vector ``theta`` (D,) gives
        outputs ``(n, out)``. ``layer_inputs``: ``{module name: fn}``, ``h -> fn(h)``
        applied to the input of those ``Linear`` layers (e.g. dropout masks). For
        training, :meth:`forward_tape` and :meth:`backward` give the gradients.
        """
        if theta.dim() == 1:
            return self._forward_one(theta, X, layer_inputs or {})
        h = X
        in_place = not torch.is_grad_enabled()
        for name, (kind, info) in zip(self.names, self.steps):
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
                h = torch.baddbmm(theta[:, None, b_off : b_off + out], hb, W.transpose(1, 2))
            else:
                h = torch.matmul(h, W.transpose(1, 2))
        return h

    def forward_tape(self, theta, X, input_masks=None):
        """Outputs ``(S, n, out)`` for weight samples ``theta`` (S, D) on rows ``X``,
        without an autograd graph, and the tape :meth:`backward` reads.

        The tape holds, step by step, each ``Linear`` layer's input ``A_l`` (S, n, in_l)
        and weights, and each activation's output (and its input when the derivative
        needs it). :meth:`linear_inputs` returns the ``A_l``. ``input_masks``:
        ``{module name: fn}``, the input ``h`` of those ``Linear`` layers becomes
        ``h * fn(h)`` (e.g. dropout: ``fn`` draws the scaled keep mask).
        """
        S = theta.shape[0]
        h = X
        tape = []
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
    def linear_inputs(tape):
        """The inputs ``A_l`` (S, n, in_l) of the ``Linear`` layers recorded on a tape."""
        return [t[1] for t in tape if t[0] == "linear"]

    def backward(self, tape, grad_out):
        """Back-propagate ``grad_out`` (S, n, out), the gradient of a loss with respect to
        the network outputs, through the network recorded on ``tape``.

        Returns the gradients with respect to every ``Linear`` layer's output, in layer
        order (the per-example ``Delta_l``), computed with the operations autograd uses
        for the same network: the same numbers as ``torch.autograd.grad`` with respect to
        the pre-activations, without building a graph. Activations outside the few with
        a closed-form derivative (ReLU, tanh, sigmoid, identity) go through autograd.
        """
        deltas = []
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

    def weight_grads(self, tape, deltas, out):
        """Write ``sum_i dL_i/dtheta`` for every weight sample into ``out`` (S, D) (zeroed
        first), from the layer inputs on ``tape`` and the ``deltas`` of :meth:`backward`;
        the operations autograd uses for the batched GEMMs of :meth:`forward`."""
        out.zero_()
        for A, Dl, (w_off, o, i, b_off) in zip(self.linear_inputs(tape), deltas, self.linears):
            gW = torch.bmm(A.transpose(1, 2), Dl)  # (S, in, out): the gradient of W^T
            out[:, w_off : w_off + o * i].view(-1, o, i).copy_(gW.transpose(1, 2))
            if b_off is not None:
                out[:, b_off : b_off + o] = Dl.sum(1)
        return out

    def _forward_one(self, theta, X, layer_inputs):
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

    def local_reparam(self, mean, var, X, n_samples, generator=None):
        """Network outputs ``(S, n, out)`` under the local reparameterisation trick.

        For every dense layer the pre-activations are sampled directly from their
        distribution given the layer input ``h`` under factorised weights with
        means ``mean`` and variances ``var`` (flat vectors),
        ``z ~ N(h mu_W^T + mu_b, h^2 (sigma_W^2)^T + sigma_b^2)``, independently for
        every example and each of the ``S`` draws. Per example this is the same
        distribution of every layer's pre-activations as drawing one weight sample
        (so the expected loss and its gradient are the same), with less variance
        across examples. Differentiable in ``mean`` and ``var``; see
        :meth:`local_reparam_tape` for the hand-written gradient.
        """
        return self.local_reparam_tape(mean, var, X, n_samples, generator)[0]

    def local_reparam_tape(self, mean, var, X, n_samples, generator=None):
        """:meth:`local_reparam`'s outputs (the same draws) and the tape
        :meth:`local_reparam_backward` reads."""
        h = X
        tape = []
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

    def local_reparam_backward(self, tape, grad_out, mean_grad, var_grad):
        """Gradients of a loss with respect to ``mean`` and ``var`` of
        :meth:`local_reparam_tape`, given its gradient ``grad_out`` (S, n, out) with
        respect to the outputs; written into ``mean_grad`` and ``var_grad`` (D,).

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


class NetworkForward:
    """Network + flat parameter vector -> outputs: the one forward path of the library.

    Hides the choice between the fast dense-layer path (a ``DenseSpec``: every
    weight sample of a call in one batched pass) and ``torch.func.functional_call``
    (any module, one pass per weight sample).

    Parameters
    ----------
    module : torch.nn.Module
        The network (its own parameters are never used by a call).
    layout : ParamLayout
        Where each parameter lives in the flat vector.
    n_features : int
        Width of the network's input rows.
    """

    def __init__(self, module, layout, n_features):
        self.module = module
        self.layout = layout
        self.n_features = int(n_features)
        self.spec = DenseSpec(module, layout) if DenseSpec.supports(module) else None
        # functional_call swaps the module's parameters for the duration of a call: calls
        # from concurrent threads (e.g. predictions) must not interleave.
        self._lock = threading.RLock()

    def __getstate__(self):
        state = dict(self.__dict__)
        del state["_lock"]  # locks cannot be pickled or copied
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.RLock()

    @property
    def dense(self):
        """True when the network takes the dense-layer path."""
        return self.spec is not None

    def __call__(self, theta, X, layer_inputs=None):
        """Outputs for weights ``theta``: (S, D) -> (S, n, out); (D,) -> (n, out).

        ``layer_inputs``: ``{module name: fn}`` applied to the inputs of those layers.
        """
        if self.spec is not None:
            return self.spec.forward(theta, X, layer_inputs=layer_inputs)
        if theta.dim() == 2:
            return torch.stack([self._call_one(th, X, layer_inputs) for th in theta])
        return self._call_one(theta, X, layer_inputs)

    def _call_one(self, theta, X, layer_inputs):
        with self._lock:
            return self._call_one_unlocked(theta, X, layer_inputs)

    def _call_one_unlocked(self, theta, X, layer_inputs):
        if not layer_inputs:
            return functional_call(self.module, self.layout.unflatten(theta), (X,))
        modules = dict(self.module.named_modules())
        hooks = [
            modules[name].register_forward_pre_hook(lambda m, args, fn=fn: (fn(args[0]),) + tuple(args[1:]))
            for name, fn in layer_inputs.items()
        ]
        try:
            return functional_call(self.module, self.layout.unflatten(theta), (X,))
        finally:
            for h in hooks:
                h.remove()


def call_order(module, X_probe):
    """Names of the submodules holding trainable parameters, in the order a forward pass
    on ``X_probe`` calls them (each once; the module is not modified)."""
    probe = copy.deepcopy(module)  # a forward pass may touch buffers (e.g. batch-norm statistics)
    order, hooks = [], []
    for name, m in probe.named_modules():
        if any(p.requires_grad for p in m.parameters(recurse=False)):
            hooks.append(m.register_forward_pre_hook(lambda mod, args, name=name: order.append(name)))
    try:
        with torch.no_grad():
            probe(X_probe)
    finally:
        for h in hooks:
            h.remove()
    seen = []
    for name in order:
        if name not in seen:
            seen.append(name)
    return seen


# --- per-layer geometry of Linear / Conv2d layers ------------------------------------
#
# Each ``nn.Linear`` / ``nn.Conv2d`` layer ``l`` is a block; the bias is folded in
# as a homogeneous coordinate. A layer's weights form the matrix ``W`` of shape
# ``(n, p)``: ``n = n_in (+1)`` inputs (for a conv layer ``n_in = C kh kw``
# patch entries), ``p`` outputs, ``W[:n_in] = weight.reshape(p, n_in).T`` and
# ``W[n_in] = bias``. ``vec`` stacks the columns of ``W`` (index ``j * n + i``).


class SharedOnCopy:
    """Base of value objects that are never modified once built (a refresh replaces them;
    at most caches of derived quantities are added): copies, deep ones included (the fit
    loop snapshots the posterior and the family state every epoch), share the object
    instead of duplicating its tensors and modules."""

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


class KronLayer(SharedOnCopy):
    """Where one Linear/Conv2d layer lives in the network and in the flat vector.

    Read-only geometry, shared by copies together with its ``module``. A step rebinds
    layers whose module is not the one its network calls (see
    :meth:`~skbayes._families.kronecker.KFACFamily.step`).
    """

    def __init__(self, name, module, w_off, b_off):
        self.name = name
        self.module = module
        self.is_conv = isinstance(module, nn.Conv2d)
        self.p = module.weight.shape[0]
        self.n_in = module.weight[0].numel()
        self.has_bias = module.bias is not None
        self.n = self.n_in + int(self.has_bias)
        self.w_off, self.b_off = w_off, b_off

    def flat_to_mat(self, theta):
        """``(..., D)`` flat vectors -> ``(..., n, p)`` weight matrices."""
        lead = theta.shape[:-1]
        w = theta[..., self.w_off : self.w_off + self.p * self.n_in].reshape(*lead, self.p, self.n_in)
        W = w.transpose(-1, -2)
        if self.has_bias:
            b = theta[..., self.b_off : self.b_off + self.p].reshape(*lead, 1, self.p)
            W = torch.cat([W, b], dim=-2)
        return W

    def mat_to_flat(self, W, out):
        """Write ``(..., n, p)`` matrices into the flat vectors ``out`` (..., D)."""
        lead = W.shape[:-2]
        out[..., self.w_off : self.w_off + self.p * self.n_in] = (
            W[..., : self.n_in, :].transpose(-1, -2).reshape(*lead, self.p * self.n_in)
        )
        if self.has_bias:
            out[..., self.b_off : self.b_off + self.p] = W[..., self.n_in, :]

    def vec_index(self, device=None):
        """Flat indices of ``vec(W)`` (column-major), for dense references."""
        i = torch.arange(self.n, device=device)
        j = torch.arange(self.p, device=device)
        I, J = torch.meshgrid(i, j, indexing="ij")
        idx = self.w_off + J * self.n_in + I
        if self.has_bias:
            idx[self.n_in, :] = self.b_off + j
        return idx.T.reshape(-1)  # column-major: j * n + i

    def patches(self, x):
        """Layer inputs as rows ``(m, T, n)`` with a trailing 1 for the bias."""
        if self.is_conv:
            mod = self.module
            cols = F.unfold(x, mod.kernel_size, dilation=mod.dilation, padding=mod.padding, stride=mod.stride)
            a = cols.transpose(1, 2)  # (m, T, C kh kw)
        else:
            a = x.reshape(-1, 1, x.shape[-1]) if x.dim() == 2 else x.reshape(x.shape[0], -1, x.shape[-1])
        if self.has_bias:
            a = torch.cat([a, a.new_ones(*a.shape[:-1], 1)], dim=-1)
        return a

    def out_grads(self, g):
        """Output gradients as rows ``(m, T, p)``."""
        if self.is_conv:
            return g.flatten(2).transpose(1, 2)
        return g.reshape(-1, 1, g.shape[-1]) if g.dim() == 2 else g.reshape(g.shape[0], -1, g.shape[-1])


#: The initialisations that regress layer by layer (they need ``kron_layers``).
_LAYERWISE_INITS = "'iblm', 'iblm_random', 'uninformative', 'heuristic', 'xavier', 'orthogonal' or 'lsuv'"


def kron_layers(module, layout):
    """The Kronecker blocks of ``module``, or a clear error for an unsupported layer."""
    pos = dict(zip(layout.names, layout.offsets))
    layers = []
    for name, mod in module.named_modules():
        own = [p for p in mod.parameters(recurse=False)]
        if not own:
            continue
        if isinstance(mod, nn.Linear) or (
            isinstance(mod, nn.Conv2d)
            and mod.groups == 1
            and mod.padding_mode == "zeros"
            and not isinstance(mod.padding, str)
        ):
            prefix = f"{name}." if name else ""
            b_off = pos[prefix + "bias"] if mod.bias is not None else None
            layers.append(KronLayer(name, mod, pos[prefix + "weight"], b_off))
        else:
            raise UnsupportedLayerError(
                f"Layer {name or '<root>'!r} ({type(mod).__name__}) has parameters but is not an nn.Linear or "
                "an nn.Conv2d (groups=1, zero padding given as integers, not 'same'/'valid'). The "
                "Kronecker-factored posteriors (NoisyKFAC and NoisyEKFAC estimators) and the layer-wise "
                f"initialisations (init={_LAYERWISE_INITS}) need every parameterised layer to be one of these. "
                "The SLANG, VOGN, Vadam, BBB and MCDropout estimators accept any module (with init='default'); "
                "or make the layer parameter-free."
            )
    covered = sum(l.p * l.n for l in layers)
    if covered != layout.size:
        raise UnsupportedLayerError("Some trainable parameters do not belong to a Linear or Conv2d layer.")
    return layers


def ordered_layers(module, layout, X):
    """Linear/Conv2d blocks in the order a forward pass on ``X`` calls them."""
    layers = {l.name: l for l in kron_layers(module, layout)}
    return [layers[name] for name in call_order(module, X[:1]) if name in layers]
