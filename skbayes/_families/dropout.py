"""MC dropout (Gal and Ghahramani, 2016): a network trained with dropout and weight decay,
with dropout kept on at prediction (its "posterior" is the distribution of masked
weight vectors, :class:`~skbayes.posteriors.DropoutPosterior`)."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from .._curvature import Masks, masked_gradient, masked_outputs
from .._docs import E
from .._networks import call_order
from .._validation import Interval
from ..posteriors import DropoutPosterior
from .base import NOISE_STEP, FamilyState, PosteriorFamily, StepContext, StepResult, adam_update
from .bbb import FIRST_ORDER_DOCS

if TYPE_CHECKING:
    from .._memory import Layer, MemoryPart
    from .._networks import NetworkForward
    from .._start import InitialPrecision


class DropoutFamily(PosteriorFamily[DropoutPosterior]):
    """Adam on the dropout-regularised MAP objective; prediction with masked weights."""

    structural_params = ("dropout", "input_dropout")  # the rates live in the posterior
    parameter_constraints = {
        "prior_precision": [Interval(numbers.Real, 0, None, closed="neither")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "dropout": [Interval(numbers.Real, 0, 1, closed="left")],
        "input_dropout": [Interval(numbers.Real, 0, 1, closed="left")],
    }
    dropout: float
    input_dropout: float

    param_docs = {
        **FIRST_ORDER_DOCS,
        "dropout": E(
            "float or 'auto'",
            """
            Drop probability ``p`` of the inputs of every ``Linear`` layer except the
            one that receives the network input, i.e. of the hidden units (the
            standard placement of MC dropout). Kept units are scaled by ``1 / (1 - p)``
            (inverted dropout), so the mean of the masked network's weights is the
            network's weights. In a custom ``module`` the same rule applies to its
            ``nn.Linear`` layers (the first parameterised layer of the forward pass
            counts as the input layer); convolutions and other layers are not
            dropped (their weights are point estimates). The module must not contain
            ``nn.Dropout`` layers of its own (they would draw from PyTorch's global
            generator): fit raises a ValueError. 'auto' is the rate the defaults
            protocol chose for this estimator: {auto_dropout}""",
        ),
        "input_dropout": E(
            "float",
            """
            Drop probability of the network's input features (the inputs of the first
            layer, when it is an ``nn.Linear``).""",
        ),
        "prior_precision": E(
            "float",
            """
            Weight decay ``lambda``: the training objective is
            ``sum_i E_mask[-log p(y_i | x_i, theta, mask)] + lambda/2 ||theta||^2``
            on all weights and biases (the MAP objective under the prior
            ``N(0, lambda^{-1} I)``, with dropout noise). In Gal and Ghahramani's
            parameterisation (unscaled masks, weight decay ``(1 - p) l^2 / 2 ||M||^2``
            on a dropped layer's weights ``M = theta / (1 - p)``) this is a prior
            length-scale ``l^2 = lambda (1 - p)``.""",
        ),
        "learning_rate": E(
            "float or 'auto'",
            """
            Adam's step size on the weights. 'auto' is the value the defaults protocol
            chose for this estimator: {auto_learning_rate} Adam moves every weight by
            about this much per step, so a step that suits a small network leaves a
            large one overconfident.""",
        ),
        "noise_precision": E(
            "'auto' or float",
            """
            Precision of the Gaussian observation noise in the units of ``y``.
            'auto' learns it: the Gamma prior ``noise_prior`` on the standardised scale and a
            Gamma variational posterior, given the dropout predictive, updated after
            every step by the conjugate natural-gradient (SVI) step of size 0.05, as
            in the Kronecker-factored estimators. A float fixes it.""",
        ),
    }
    attr_docs = {
        "loss_curve_": E(
            "list of float",
            """
            Training loss per epoch per training example: the average minibatch
            estimate of ``E_mask[-log p(y | X, theta)]`` over the epoch plus
            ``lambda/2 ||theta||^2`` at its end (regressors: on standardised targets,
            with the noise precision's KL). Not an ELBO: MC dropout has no closed-form
            variational objective.""",
        ),
        "posterior_": E(
            "DropoutPosterior",
            """
            The distribution of masked weight vectors: ``mean`` (the weights),
            ``sample(n, random_state)``, exact ``variance()`` and (small models)
            ``covariance()``; ``precision()`` raises NotImplementedError (not a
            Gaussian, singular covariance). ``masked_layers`` lists the dropped layers.""",
        ),
    }

    def dropout_groups(self, forward: NetworkForward) -> list[tuple[str, int, int, int, float]]:
        """``(name, weight offset, out, in, rate)`` for every ``Linear`` layer of the network.

        The layer that receives the network input gets ``input_dropout``, every other
        ``Linear`` layer ``dropout`` (on its inputs: the hidden units feeding it).
        """
        net, layout = forward.module, forward.layout
        pos = dict(zip(layout.names, layout.offsets))
        if any(isinstance(m, nn.modules.dropout._DropoutNd) for m in net.modules()):
            raise ValueError(
                "module contains torch.nn dropout layers; MC dropout applies dropout itself "
                "(rate `dropout`) to the inputs of every Linear layer but the first, with masks drawn from "
                "its seeded generator: remove the nn.Dropout layers from the module."
            )
        modules = dict(net.named_modules())
        p0 = next(net.parameters())
        order = call_order(net, torch.zeros(2, forward.n_features, dtype=p0.dtype, device=p0.device))
        first = order[0] if order else None
        groups = []
        for name in order:
            m = modules[name]
            key = f"{name}.weight" if name else "weight"
            if not isinstance(m, nn.Linear) or key not in pos:
                continue
            rate = float(self.input_dropout if name == first else self.dropout)
            groups.append((name, pos[key], m.out_features, m.in_features, rate))
        return groups

    def memory_parts(
        self, layers: list[Layer], batch_size: int, mc_samples: int, itemsize: int, dense: bool = True
    ) -> list[MemoryPart]:
        """The weights and Adam's two moments (3 vectors); a step's gradient and the
        activations of ``mc_samples`` masked copies of the minibatch (with their masks)."""
        from .._memory import MemoryPart, activation_bytes, n_params

        D, S = n_params(layers), int(mc_samples)
        return [
            MemoryPart(3 * D * itemsize, f"the weights and Adam's moments ({D} weights)", "hidden_layer_sizes"),
            MemoryPart(
                3 * D * itemsize + activation_bytes(layers, S * batch_size, itemsize, copies=5),
                "one minibatch step",
                "batch_size or mc_samples",
            ),
        ]

    def init_posterior(
        self,
        mean: Tensor,
        precision: InitialPrecision | None,
        n_train: float,
        forward: NetworkForward,
        kl_scale: float,
        prior_precision: float | Tensor,
    ) -> tuple[DropoutPosterior, FamilyState]:
        # The initialiser's variances are not used: the spread of MC dropout is set by
        # the rates and the weights.
        post = DropoutPosterior(mean.clone(), self.dropout_groups(forward))
        z = torch.zeros_like(mean)
        return post, {"step": 0, "w_m": z.clone(), "w_v": z.clone()}

    def kl(self, post: DropoutPosterior, state: FamilyState, kl_scale: float, prior_precision: float | Tensor) -> float:
        # The weight-decay term lambda/2 ||theta||^2 (the negative log prior up to a
        # constant) in place of a KL: ``loss_curve_`` is the regularised training loss.
        w = post.mean_t
        return 0.5 * (float(prior_precision) * kl_scale) * float((w * w).sum())

    def train_outputs(self, post: DropoutPosterior, theta: Tensor, Xb: Tensor, ctx: StepContext) -> Tensor:
        """Outputs ``(S, M, out)`` with fresh dropout masks per example and per sample.

        ``theta`` (the weights, possibly requiring grad) is not masked: the masks act on
        the layer inputs, independently for every example (standard dropout).
        """
        return masked_outputs(ctx.forward, theta, Xb, self._masks(post, ctx.generator), ctx.mc_samples)

    @staticmethod
    def _masks(post: DropoutPosterior, gen: torch.Generator) -> Masks:
        """``{layer name: h -> keep mask / (1 - rate)}``, fresh Bernoulli draws per call."""

        def drop(p: float) -> Callable[[Tensor], Tensor]:
            def mask(h: Tensor) -> Tensor:
                keep = (torch.rand(h.shape, generator=gen, dtype=h.dtype, device=h.device) >= p).to(h.dtype)
                return keep / (1.0 - p)

            return mask

        return {name: drop(p) for name, _, _, _, p in post.groups}

    def step(self, post: DropoutPosterior, state: FamilyState, Xb: Tensor, yb: Tensor, ctx: StepContext) -> StepResult:
        """One step of Adam on ``(N/M) sum_i nll_i(masked net) + lambda/2 ||theta||^2``, per example."""
        lam = float(ctx.prior_precision) * ctx.kl_scale
        masks = self._masks(post, ctx.generator)
        g, data, f = masked_gradient(
            ctx.forward, post.mean_t, Xb, masks, yb, ctx.likelihood, ctx.mc_samples, ctx.n_train, lam, ctx.weights
        )
        state["step"] += 1
        post.mean_t = adam_update(post.mean_t, g, state, "w", float(self.learning_rate))
        return StepResult(float(data), f, NOISE_STEP)
