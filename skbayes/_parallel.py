"""Keep torch's intra-op threads within the share of the cores a fit is given.

A fit that runs in a dask worker or a joblib process worker is one of several
running side by side on the same machine. Torch's CPU kernels spread over
``torch.get_num_threads()`` threads, by default one per core, so workers that
each use every core oversubscribe it. :func:`limit_torch_threads` caps torch's
thread count, for the duration of one fit or prediction, at the smallest of
the limits that apply:

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

The count is only ever lowered, never raised, and is restored on exit, also
when the fit raises; when no limit applies, or it is not below the current
count, nothing is changed (and ``torch.set_num_threads`` is not called).

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

import os
import sys
from contextlib import contextmanager

import torch

__all__ = ["limit_torch_threads", "torch_thread_limit"]

_OPENMP_BACKEND = None  # whether torch runs its intra-op kernels on OpenMP (checked once)


def _positive_int(value):
    """The first entry of an ``OMP_NUM_THREADS``-style value ("4" or "4,2") as a positive int, or None."""
    if not value:
        return None
    try:
        n = int(value.split(",")[0].strip())
    except ValueError:
        return None
    return n if n > 0 else None


def _environment_limit():
    """The thread count torch derives from the environment (MKL's variable first, as torch does), or None."""
    if torch.backends.mkl.is_available():
        n = _positive_int(os.environ.get("MKL_NUM_THREADS"))
        if n is not None:
            return n
    return _positive_int(os.environ.get("OMP_NUM_THREADS"))


def _dask_worker_limit():
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


def _openmp_backend():
    global _OPENMP_BACKEND
    if _OPENMP_BACKEND is None:
        _OPENMP_BACKEND = "parallel backend: OpenMP" in torch.__config__.parallel_info()
    return _OPENMP_BACKEND


@contextmanager
def limit_torch_threads():
    """Cap ``torch.get_num_threads()`` at :func:`torch_thread_limit` inside the block.

    The count is lowered only, and restored on exit (also on exceptions). When
    no limit applies or it is not below the current count, nothing is changed.
    Nested uses are cheap: the inner one finds the count already capped.
    """
    limit = torch_thread_limit()
    if limit is None:
        yield
        return
    before = torch.get_num_threads()
    if limit >= before or not _openmp_backend():
        yield
        return
    torch.set_num_threads(limit)
    try:
        yield
    finally:
        torch.set_num_threads(before)
