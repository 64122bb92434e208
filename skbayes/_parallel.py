"""Torch's intra-op threads for one fit or prediction: as many as the work gains
from, within the share of the cores the call is given.

**How many threads the work gains from.** Torch's CPU kernels spread over
``torch.get_num_threads()`` threads, by default one per core. Small products
(a minibatch of 64 rows through a network of a few thousand weights) finish in
microseconds, too fast for a second thread to pay for waking and joining it;
on a machine that other programs keep busy, every parallel kernel also waits
for its slowest thread to be scheduled, and fits of small networks become tens
of times slower than at one thread. :func:`policy_threads` therefore gives a
call one thread per ``WORK_PER_THREAD`` multiply-adds of its network pass (the
network's multiply-adds per row times the rows processed together: the
minibatch times ``mc_samples`` in training, up to 2048 rows times up to 16
weight samples in prediction), at least one and at most the current count.
``limit_torch_threads(n_threads=k)`` asks for exactly ``k`` instead (the
estimators' ``n_threads`` parameter), the only way the count is ever raised.

**The share of the cores.** A fit that runs in a dask worker or a joblib
process worker is one of several running side by side on the same machine, and
workers that each use every core oversubscribe it. :func:`limit_torch_threads`
caps torch's thread count, for the duration of one fit or prediction, at the
smallest of the limits that apply:

- inside a dask worker (a task running on a ``distributed.Worker``), the
  worker's number of threads. ``distributed`` is looked at only if something
  has already imported it, so skbayes never imports dask;
- the thread count the environment asks for: ``MKL_NUM_THREADS`` (when torch is
  built with MKL), else ``OMP_NUM_THREADS``, read as torch itself reads them
  at start-up. This is how joblib's process workers (its "inner thread limit",
  ``parallel_config(inner_max_num_threads=...)``, by default the cores divided
  by ``n_jobs``) and dask's nanny (``OMP_NUM_THREADS=1``) pass a worker its
  share. A process that never calls ``torch.set_num_threads`` already runs
  torch at this count, so this limit only undoes a later explicit increase;
- ``threadpoolctl.threadpool_limits`` needs nothing: it sets the OpenMP thread
  count of the calling thread, which is what ``torch.get_num_threads()``
  reports, and the count is never raised above that.

These limits cap the count in every case, ``n_threads`` included. The count is
restored on exit, also when the block raises; when the count the call should
run at equals the current one, nothing is changed (and ``torch.set_num_threads``
is not called).

``torch.set_num_threads`` is process-wide state. With torch's OpenMP backend
(the official CPU wheels) the active count is held per OS thread, so capping
it in one thread leaves the other threads' counts alone; but torch also keeps
the last value set as the default for threads that have not yet run a
parallel kernel, so a thread that starts its first torch work while another
thread is inside this context inherits the cap for good. With other parallel
backends the count is truly global (and torch's native backend refuses to
change it once parallel work has started), so this context does nothing there.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import torch
from torch import nn

__all__ = ["ThreadScope", "limit_torch_threads", "network_macs_per_row", "policy_threads", "torch_thread_limit"]

#: Multiply-adds of a network pass per thread: a call runs on ``work // WORK_PER_THREAD``
#: threads (at least one). A float64 product of this size takes about half a millisecond
#: on one AVX-512 core. On a 2-core machine a second thread gained at most 1.6x on products
#: of 2e5 to 1e7 multiply-adds, and with two busy background processes it made them 10 to
#: 500 times slower (``benchmarks/bench_threads.py --micro``): the threshold trades a
#: possible gain on an idle machine for safety on a busy one.
WORK_PER_THREAD = 1e7

_OPENMP_BACKEND: bool | None = None  # whether torch runs its intra-op kernels on OpenMP (checked once)


def _positive_int(value: str | None) -> int | None:
    """The first entry of an ``OMP_NUM_THREADS``-style value ("4" or "4,2") as a positive int, or None."""
    if not value:
        return None
    try:
        n = int(value.split(",")[0].strip())
    except ValueError:
        return None
    return n if n > 0 else None


def _environment_limit() -> int | None:
    """The thread count torch derives from the environment (MKL's variable first, as torch does), or None."""
    if torch.backends.mkl.is_available():
        n = _positive_int(os.environ.get("MKL_NUM_THREADS"))
        if n is not None:
            return n
    return _positive_int(os.environ.get("OMP_NUM_THREADS"))


def _dask_worker_limit() -> int | None:
    """The number of threads of the dask worker running the current task, or None outside one."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        worker = distributed.get_worker()
    except Exception:  # ValueError outside a task; anything else: an API we do not know, so no limit
        return None
    n = getattr(getattr(worker, "state", worker), "nthreads", None)
    return n if isinstance(n, int) and n > 0 else None


def torch_thread_limit() -> int | None:
    """The upper bound on torch's intra-op threads that applies here, or None.

    The smallest of the dask worker's thread count (inside a dask task) and the
    count the environment asks for (``MKL_NUM_THREADS`` / ``OMP_NUM_THREADS``).
    """
    limits = [n for n in (_dask_worker_limit(), _environment_limit()) if n is not None]
    return min(limits) if limits else None


def _openmp_backend() -> bool:
    """Whether torch runs its intra-op kernels on OpenMP (asked once)."""
    global _OPENMP_BACKEND
    if _OPENMP_BACKEND is None:
        _OPENMP_BACKEND = "parallel backend: OpenMP" in torch.__config__.parallel_info()
    return _OPENMP_BACKEND


def policy_threads(work: float | None, available: int) -> int:
    """The automatic thread count for a call of ``work`` multiply-adds per network
    pass: one per ``WORK_PER_THREAD``, at least 1 and at most ``available``
    (``available`` itself when the work is not given)."""
    if work is None:
        return int(available)
    return max(1, min(int(available), int(work // WORK_PER_THREAD)))


_COUNTED = (nn.Linear, nn.Bilinear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


def network_macs_per_row(module: nn.Module, x: torch.Tensor) -> float:
    """Multiply-adds per row of one forward pass of ``module`` on ``x`` (it runs the pass).

    Linear, bilinear and convolution layers are counted from their output shapes;
    when they add up to less than the number of weights (modules made of other
    layers), the number of weights is the estimate.
    """
    total = [0]

    def count(layer: nn.Module, inputs: tuple[Any, ...], output: Any) -> None:
        if not isinstance(output, torch.Tensor):
            return
        if isinstance(layer, nn.Linear):
            per_output = layer.in_features
        elif isinstance(layer, nn.Bilinear):
            per_output = layer.in1_features * layer.in2_features
        else:  # a convolution: the hooks sit on the layers of _COUNTED only
            conv = cast(nn.modules.conv._ConvNd, layer)
            per_output = (conv.in_channels // conv.groups) * math.prod(conv.kernel_size)
        total[0] += output.numel() * per_output

    hooks = [m.register_forward_hook(count) for m in module.modules() if isinstance(m, _COUNTED)]
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):  # leave the global generator alone
            module(x)
    finally:
        for h in hooks:
            h.remove()
    n_weights = sum(p.numel() for p in module.parameters())
    return max(total[0] / max(int(x.shape[0]), 1), float(n_weights))


class ThreadScope:
    """The thread count of one call, set on entering :func:`limit_torch_threads`;
    :meth:`update` re-decides it when the work becomes known later (a custom
    module is only built during the fit)."""

    def __init__(self, n_threads: int | None, before: int) -> None:
        self.n_threads, self.before = n_threads, before
        self.changed = False

    def count_for(self, work: float | None) -> int:
        """The count a call of ``work`` multiply-adds per pass runs at here."""
        limit = torch_thread_limit()
        if self.n_threads is not None:
            n = int(self.n_threads)
        else:
            n = policy_threads(work, self.before)
        return n if limit is None else min(n, limit)

    def update(self, work: float | None) -> None:
        """Run the rest of the block at the count for ``work``."""
        n = self.count_for(work)
        if n != torch.get_num_threads() and _openmp_backend():
            torch.set_num_threads(n)
            self.changed = True


@contextmanager
def limit_torch_threads(n_threads: int | None = None, work: float | None = None) -> Iterator[ThreadScope]:
    """Run the block at the thread count for ``work`` (see the module docstring).

    Parameters
    ----------
    n_threads : int or None
        None: :func:`policy_threads` of ``work``, never above the current count.
        An int: exactly that many. Both capped by :func:`torch_thread_limit`.
    work : float or None
        Multiply-adds of the call's network pass; None keeps the current count
        (capped by the limits).

    The count is restored on exit (also on exceptions). Yields a
    :class:`ThreadScope` whose ``update(work)`` re-decides the count inside the
    block. Nested uses are cheap: an inner one that finds the count it wants
    changes nothing.
    """
    before = torch.get_num_threads()
    scope = ThreadScope(n_threads, before)
    try:
        scope.update(work)
        yield scope
    finally:
        if scope.changed:
            torch.set_num_threads(before)
