"""The fit loop's snapshots: ``_loop.deep_copy`` against ``copy.deepcopy``.

The loop copies the posterior and the family state at the start of every epoch (to revert a
diverged epoch or keep the best one). ``deep_copy`` is a faster ``copy.deepcopy`` for what
that state holds; these tests hold it to ``copy.deepcopy``'s result: the same values, types,
shapes and strides, the same sharing of tensors and of their storage, nothing shared with the
original, and objects copied through their ``__getstate__``.
"""

import collections
import copy
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_diabetes, load_wine
from sklearn.preprocessing import StandardScaler

import skbayes
from skbayes import _loop
from skbayes._loop import deep_copy
from skbayes._networks.geometry import SharedOnCopy


class _Plain:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class _Cached(_Plain):
    """Drops a cache from its state, as the low-rank posterior drops its scratch buffer."""

    def __getstate__(self):
        state = dict(self.__dict__)
        state["cache"] = None
        return state


class _SetState(_Plain):
    def __setstate__(self, state):
        self.__dict__.update(state)
        self.restored = True


class _Frozen(SharedOnCopy):
    def __init__(self, t):
        self.t = t


def _walk(x, seen=None):
    """Every object reachable from ``x`` in depth-first order (SharedOnCopy objects not entered)."""
    seen = set() if seen is None else seen
    if id(x) in seen:
        return
    seen.add(id(x))
    yield x
    if isinstance(x, SharedOnCopy) or isinstance(x, torch.Tensor):
        return
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _walk(k, seen)
            yield from _walk(v, seen)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _walk(v, seen)
    elif hasattr(x, "__dict__") and not isinstance(x, type):
        yield from _walk(vars(x), seen)


def _assert_same_copy(original, a, b):
    """``a`` (copy.deepcopy's) and ``b`` (deep_copy's) are the same copy of ``original``."""
    wa, wb = list(_walk(a)), list(_walk(b))
    assert [type(x) for x in wa] == [type(x) for x in wb]
    for x, y in zip(wa, wb):
        if isinstance(x, torch.Tensor):
            layout = (x.dtype, x.shape, x.stride(), x.storage_offset())
            assert layout == (y.dtype, y.shape, y.stride(), y.storage_offset())
            assert x.requires_grad == y.requires_grad
            torch.testing.assert_close(x, y, rtol=0, atol=0, equal_nan=True)
        elif isinstance(x, dict):
            assert list(x) == list(y)
        elif isinstance(x, torch.Generator):
            assert torch.equal(x.get_state(), y.get_state())
        elif not isinstance(x, (list, tuple)) and not hasattr(x, "__dict__"):
            assert x == y or (x != x and y != y)
    # the same objects shared, the same tensors on one storage
    ids_a, ids_b = [id(x) for x in wa], [id(y) for y in wb]
    assert [ids_a.index(i) for i in ids_a] == [ids_b.index(i) for i in ids_b]

    def storages(objs):
        ptrs = [x.untyped_storage().data_ptr() if isinstance(x, torch.Tensor) and x.numel() else None for x in objs]
        return [ptrs.index(p) if p is not None else None for p in ptrs]

    assert storages(wa) == storages(wb)
    # nothing mutable shared with the original, but the SharedOnCopy objects
    orig = {id(x) for x in _walk(original) if not isinstance(x, (int, float, str, bool, type(None), tuple))}
    orig_ptrs = {x.untyped_storage().data_ptr() for x in _walk(original) if isinstance(x, torch.Tensor) and x.numel()}
    for y in wb:
        if isinstance(y, (int, float, str, bool, type(None), tuple, SharedOnCopy, torch.dtype)):
            continue
        assert id(y) not in orig
        if isinstance(y, torch.Tensor) and y.numel():
            assert y.untyped_storage().data_ptr() not in orig_ptrs


def _state():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(4, 6, dtype=torch.float64, generator=g)
    Ut = torch.randn(3, 5, generator=g)
    shared = torch.arange(5.0)
    obj = {
        "base": base,
        "row": base[1],  # a view of base
        "cols": base[:, 2:4],  # a strided view
        "U": Ut.T,  # a transposed view, stored alone (as the low-rank factor)
        "twice": [shared, shared, (shared, 1.5)],
        "empty": torch.empty(0, 3),
        "int": torch.tensor([1, 2, 3]),
        "grad": torch.ones(3, requires_grad=True),
        "param": torch.nn.Parameter(torch.zeros(2)),
        "gen": torch.Generator().manual_seed(3),
        "ordered": collections.OrderedDict(a=torch.ones(2), b=2),
        "cached": _Cached(mean=torch.ones(3), cache=torch.zeros(7)),
        "setstate": _SetState(x=torch.ones(1)),
        "frozen": _Frozen(torch.ones(2)),
        "plain": _Plain(n=3, s="x", f=0.5, t=(1, 2), none=None, dtype=torch.float32),
        1.5: "a float key",
    }
    obj["self"] = obj  # a cycle
    obj["plain"].back = obj["plain"]
    return obj


def test_deep_copy_gives_deepcopys_copy():
    obj = _state()
    a, b = copy.deepcopy(obj), deep_copy(obj)
    _assert_same_copy(obj, a, b)
    assert b["self"] is b and b["plain"].back is b["plain"]
    assert b["cached"].cache is None and b["setstate"].restored
    assert b["frozen"] is obj["frozen"]  # shared, as copy.deepcopy shares it
    assert b["twice"][2] is not obj["twice"][2] and b["twice"][2][0] is b["twice"][0]
    assert type(b["param"]) is torch.nn.Parameter and b["grad"].requires_grad
    assert list(b["ordered"]) == ["a", "b"]
    # the views still alias their copied base; the copies are independent of the original
    b["base"][1, 2] = 100.0
    assert b["row"][2] == 100.0 and b["cols"][1, 0] == 100.0
    assert obj["base"][1, 2] != 100.0
    assert b["U"].is_contiguous() is False and b["U"].T.is_contiguous()


def test_deep_copy_leaves_the_original_alone():
    obj = _state()
    before = copy.deepcopy(obj)
    deep_copy(obj)
    _assert_same_copy(obj, before, copy.deepcopy(obj))
    assert obj["cached"].cache is not None


_ESTIMATORS = sorted(n for n in dir(skbayes) if n.endswith(("Classifier", "Regressor")) and not n.startswith("_"))


@pytest.mark.parametrize("name", _ESTIMATORS)
def test_every_snapshot_of_a_fit_equals_deepcopys(name, monkeypatch):
    """Every snapshot taken while fitting (and with early stopping's best-epoch copies) is
    the copy ``copy.deepcopy`` makes of the same state."""
    clf = "Classifier" in name
    X, y = load_wine(return_X_y=True) if clf else load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    seen = []
    take = _loop.snapshot

    def checked(state):
        for part in (state.posterior, state.family_state, state.likelihood.get_state()):
            _assert_same_copy(part, copy.deepcopy(part), deep_copy(part))
        seen.append(1)
        return take(state)

    monkeypatch.setattr(_loop, "snapshot", checked)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for es in (False, True):
            est = getattr(skbayes, name)(hidden_layer_sizes=(6,), max_iter=3, early_stopping=es, random_state=0)
            est.fit(X, y)
    assert len(seen) >= 6
    assert np.isfinite(est.predict(X)).all()
