"""Memory checked before it is spent.

One limit serves every estimator: ``skbayes.linear_model.MEMORY_LIMIT_GIB`` (8 GiB by
default), capped by the machine's physical memory. Before a network estimator builds
its network, each posterior family estimates the bytes of its posterior (with the
curvature factors and optimiser state it keeps) and of one minibatch step from the
layer shapes, the minibatch size, ``mc_samples`` and its own parameters (SLANG's
``rank``), as a list of :class:`MemoryPart`; :func:`check_memory` refuses with
:class:`~skbayes.exceptions.MemoryLimitError`, naming the largest parts and the
parameter that controls each, when their sum is above the limit. Nothing is
allocated before the check. Prediction works in row chunks (:func:`row_chunk`) of
bounded memory.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from torch import nn

from .exceptions import MemoryLimitError

#: Memory, in bytes, that one chunk of prediction rows may use for its network outputs.
PREDICT_CHUNK_BYTES = 64 * 2**20

#: Memory, in bytes, that a prediction over several row chunks may keep its weight samples in,
#: so that they are drawn once, not once per chunk (drawing 100 samples of noisy K-FAC's
#: 478,410 weights took two thirds of a 5,000-row Fashion-MNIST prediction: 13.1 s against 4.0 s
#: with the draws kept, 191 MB in float32). Larger draws are made again for every chunk.
PREDICT_SAMPLES_BYTES = 256 * 2**20

#: A prediction whose weight samples take at most this many bytes draws them in one block;
#: larger ones draw blocks of 16 samples. One block spares a small network the per-block cost
#: of the draws (noisy K-FAC's 100 samples of a 9-50-1 network, 501 weights in float64, on
#: 100 rows: 2.4 ms in one block against 3.9 ms in blocks of 16, one thread). On larger
#: draws the products dominate and blocks of more than 16 samples were slower (VadamClassifier
#: on digits, 1,000 samples of 3,760 weights: 326 ms in blocks of 34 against 264-288 ms).
SAMPLE_BLOCK_BYTES = 2**20

#: Networks of at least this many weights take the large-network value of a ``kl_weight`` or
#: ``predictive`` set to ``'auto'``. It lies between the networks of the protocol's two
#: classification groups: at most 3,760 weights on the small sets (digits, 64-50-10) and
#: 79,510 on the Fashion-MNIST subset (784-100-10); not a measured optimum.
LARGE_NETWORK_WEIGHTS = 20_000


@dataclass
class MemoryPart:
    """One term of a memory estimate: ``nbytes`` for ``what``, controlled by ``fix``;
    ``copied``: the fraction that the fit's snapshots duplicate (0 for a step's working
    memory, less than 1 where part of the state is shared between copies)."""

    nbytes: float
    what: str
    fix: str
    copied: float = 1.0


@dataclass
class Layer:
    """A parameterised layer as the estimates see it: ``fan_in`` inputs (a conv layer's
    ``in_channels * kernel`` patch) to ``fan_out`` outputs, ``bias`` or not, and the number
    of positions it is applied at per example (1 for a dense layer)."""

    fan_in: int
    fan_out: int
    bias: bool = True
    positions: int = 1

    @property
    def n_params(self) -> int:
        return (self.fan_in + int(self.bias)) * self.fan_out


def physical_memory() -> int:
    """Bytes of physical memory, or 0 where it cannot be queried."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return 0


def memory_limit_bytes() -> float:
    """``skbayes.linear_model.MEMORY_LIMIT_GIB`` in bytes, capped by the physical memory
    when it can be queried (read at every call, so that setting it takes effect)."""
    from . import linear_model  # the limit users set lives there (linear_model imports this module)

    limit = float(linear_model.MEMORY_LIMIT_GIB) * 2**30
    physical = physical_memory()
    if physical > 0:
        limit = min(limit, float(physical))
    return limit


def gib(nbytes: float) -> float:
    """Bytes in GiB."""
    return float(nbytes) / 2**30


def check_memory(parts: Sequence[MemoryPart], who: str) -> float:
    """Raise :class:`MemoryLimitError` when the parts sum to more than the limit; returns the sum.

    The message names the total, the limit and the largest parts with the parameter that
    controls each (the parts above a tenth of the total, at most three).
    """
    total = float(sum(p.nbytes for p in parts))
    limit = memory_limit_bytes()
    if total <= limit:
        return total
    big = sorted(parts, key=lambda p: -p.nbytes)
    big = [p for p in big if p.nbytes >= 0.1 * total][:3] or big[:1]
    detail = "; ".join(f"{p.what}: about {gib(p.nbytes):.3g} GiB (to reduce it: {p.fix})" for p in big)
    raise MemoryLimitError(
        f"{who} would need about {gib(total):.3g} GiB of memory, above the limit of {gib(limit):.3g} GiB "
        f"(skbayes.linear_model.MEMORY_LIMIT_GIB = {_limit_setting()}, capped by the physical memory), "
        f"so nothing was allocated. The largest parts: {detail}. Raise skbayes.linear_model.MEMORY_LIMIT_GIB "
        "if the machine has the memory."
    )


def _limit_setting() -> float:
    """``skbayes.linear_model.MEMORY_LIMIT_GIB`` as set."""
    from . import linear_model

    return linear_model.MEMORY_LIMIT_GIB


def mlp_layers(n_features: int, hidden: tuple[int, ...], n_outputs: int) -> list[Layer]:
    """The dense layers of the built network ``n_features -> hidden... -> n_outputs``."""
    sizes = [int(n_features), *(int(h) for h in hidden), int(n_outputs)]
    return [Layer(a, b) for a, b in zip(sizes[:-1], sizes[1:])]


def module_layers(module: nn.Module) -> list[Layer]:
    """The parameterised layers of a custom module (its ``Linear`` and ``Conv2d`` layers;
    any other parameter counts as a dense layer of one output per parameter)."""
    layers: list[Layer] = []
    counted: set[int] = set()
    for m in module.modules():
        if isinstance(m, nn.Linear):
            layers.append(Layer(m.in_features, m.out_features, m.bias is not None))
        elif isinstance(m, nn.Conv2d):
            k = int(math.prod(m.kernel_size))
            layers.append(Layer(m.in_channels // m.groups * k, m.out_channels, m.bias is not None))
        else:
            continue
        counted.update(id(p) for p in m.parameters(recurse=False))
    rest = sum(p.numel() for p in module.parameters() if id(p) not in counted)
    if rest:
        layers.append(Layer(1, int(rest), bias=False))
    return layers


def n_params(layers: Iterable[Layer]) -> int:
    """Parameters of the layers, biases included."""
    return int(sum(l.n_params for l in layers))


def activation_bytes(layers: Sequence[Layer], n_rows: int, itemsize: int, copies: int = 4) -> float:
    """Bytes of the layer inputs and outputs of ``n_rows`` rows (weight samples times
    minibatch rows), ``copies`` times over (forward tape, output gradients, temporaries)."""
    width = layers[0].fan_in * layers[0].positions + sum(l.fan_out * l.positions for l in layers)
    return float(copies) * n_rows * width * itemsize


def sample_block(n_samples: int, n_params: int, itemsize: int) -> int:
    """Weight samples per block of a prediction of ``n_samples`` samples of ``n_params``
    weights: all of them when they fit in ``SAMPLE_BLOCK_BYTES``, else 16."""
    n_samples = max(1, int(n_samples))
    if n_samples * int(n_params) * int(itemsize) <= SAMPLE_BLOCK_BYTES:
        return n_samples
    return min(n_samples, 16)


#: Rows times weight samples that one batched network pass of a prediction evaluates at once
#: (2048 rows under 16 samples): bounds its activations' memory.
PASS_ROWS_X_SAMPLES = 16 * 2048


def pass_shape(n_rows: int, block: int) -> tuple[int, int]:
    """``(samples, rows)`` of one network pass of a prediction over ``n_rows`` rows with
    blocks of ``block`` weight samples: up to 2048 rows under 16 samples, and fewer rows
    under more samples (up to the block) so that a pass evaluates about
    ``PASS_ROWS_X_SAMPLES`` of them. Few rows take a block in one pass (its per-pass cost
    is then paid once); many rows are evaluated under 16 samples at a time, which is
    faster there (SLANG, 8-50-1, 100 samples in one block, 20,000 rows: 139 ms against 174 ms
    in passes of all 100 samples over 327 rows)."""
    block = max(1, int(block))
    samples = min(block, max(16, PASS_ROWS_X_SAMPLES // max(int(n_rows), 1)))
    return samples, max(1, PASS_ROWS_X_SAMPLES // max(samples, 16))


def row_chunk(n_samples: int, n_outputs: int, itemsize: int, widest: int) -> int:
    """Rows per prediction chunk: the network outputs of ``n_samples`` weight samples (three
    copies: outputs, probabilities, their reduction), and the activations of the widest
    layer for 16 samples (a network pass: :func:`pass_shape`), fit in
    ``PREDICT_CHUNK_BYTES``; at least one row."""
    per_row = itemsize * (int(n_samples) * max(int(n_outputs), 1) * 3 + 16 * 2 * max(int(widest), 1))
    return max(1, int(PREDICT_CHUNK_BYTES // max(per_row, 1)))
