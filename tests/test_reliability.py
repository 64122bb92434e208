"""State guarantees (issue "Nothing silent"): transactional fits, interrupted fits,
thread-safe prediction, outputs that are finite or an error, and the warnings that
name a bad setup (input scale, a fit worse than a constant, a rank beyond D)."""

import pickle
import threading
import warnings

import numpy as np
import pytest
import torch
from conftest import clf_data, reg_data
from sklearn.exceptions import ConvergenceWarning
from torch import nn

import skbayes
from skbayes import _loop
from skbayes.exceptions import (
    InputScaleWarning,
    InvalidParameterError,
    NonFiniteOutputError,
    PoorFitWarning,
)

REGRESSORS = [
    skbayes.SLANGRegressor,
    skbayes.VOGNRegressor,
    skbayes.VadamRegressor,
    skbayes.BBBRegressor,
    skbayes.MCDropoutRegressor,
    skbayes.NoisyKFACRegressor,
]
CLASSIFIERS = [
    skbayes.SLANGClassifier,
    skbayes.VOGNClassifier,
    skbayes.VadamClassifier,
    skbayes.BBBClassifier,
    skbayes.MCDropoutClassifier,
    skbayes.NoisyKFACClassifier,
]
NETWORKS = REGRESSORS + CLASSIFIERS + [skbayes.NoisyEKFACRegressor, skbayes.NoisyEKFACClassifier]
SMALL = dict(hidden_layer_sizes=(6,), max_iter=4, predict_samples=5, random_state=0)


def _data(cls):
    if cls in REGRESSORS or cls.__name__.endswith("Regressor"):
        return reg_data(60, scale=True)
    X, y = clf_data(scale=True)
    return X, y


def _predictions(est, X):
    if hasattr(est, "predict_proba"):
        return est.predict_proba(X), est.predict_std(X)
    return est.predict(X, return_std=True)


def _fitted_state(est):
    params = est.get_params(deep=False)
    return {k: v for k, v in vars(est).items() if k not in params}


def _same(a, b, seen=None):
    """Structural equality with bit-identical tensors and arrays."""
    seen = set() if seen is None else seen
    if id(a) in seen:
        return True
    seen.add(id(a))
    if isinstance(a, torch.Tensor):
        same_kind = isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        return same_kind and a.cpu().numpy().tobytes() == b.cpu().numpy().tobytes()  # bits (NaN == NaN)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, nn.Module):
        sa, sb = a.state_dict(), b.state_dict()
        return type(a) is type(b) and sa.keys() == sb.keys() and all(_same(sa[k], sb[k], seen) for k in sa)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k], seen) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, z, seen) for x, z in zip(a, b))
    if isinstance(a, (int, float, str, bytes, bool, type(None), np.generic, torch.dtype, torch.device)):
        return type(a) is type(b) and (a == b or (a != a and b != b))
    if hasattr(a, "__dict__"):
        return type(a) is type(b) and _same(vars(a), vars(b), seen)
    if isinstance(a, type(threading.RLock())):
        return type(a) is type(b)
    return pickle.dumps(a) == pickle.dumps(b)


def _assert_same_state(before, after):
    """The same fitted attributes, with bit-identical values (``before`` went through
    pickle, which drops scratch buffers: so does ``after``)."""
    after = pickle.loads(pickle.dumps(after))
    assert sorted(before) == sorted(after)
    for k in before:
        assert _same(before[k], after[k]), k


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


# --- transactional fits ----------------------------------------------------------------


@pytest.mark.parametrize("cls", NETWORKS, ids=lambda c: c.__name__)
def test_refit_that_fails_half_way_leaves_the_previous_model(cls, monkeypatch):
    """Targets, classes, n_features_in_ and the noise are replaced before training starts;
    a failure in training must restore all of them (predictions bit-identical)."""
    X, y = _data(cls)
    est = cls(**SMALL).fit(X, y)
    before_pred, before_state = _predictions(est, X[:7]), pickle.loads(pickle.dumps(_fitted_state(est)))

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(_loop, "run_epochs", boom)
    X2 = np.hstack([X, X[:, :2]])  # a new number of features
    y2 = 1000 * y + 50 if cls.__name__.endswith("Regressor") else np.where(y == 0, 7, y)  # new labels
    with pytest.raises(RuntimeError, match="boom"):
        est.fit(X2, y2)
    monkeypatch.undo()
    _assert_same_state(before_state, _fitted_state(est))
    for a, b in zip(before_pred, _predictions(est, X[:7])):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cls", [skbayes.SLANGRegressor, skbayes.NoisyKFACClassifier], ids=lambda c: c.__name__)
def test_warm_start_and_partial_fit_failures_restore_the_continued_state(cls, monkeypatch):
    """Continuing fits mutate the posterior in place: a failure mid-epoch restores it."""
    X, y = _data(cls)
    est = cls(**SMALL, warm_start=True, tol=0.0, batch_size=16).fit(X, y)
    before_pred, before_state = _predictions(est, X[:7]), pickle.loads(pickle.dumps(_fitted_state(est)))
    real_step, calls = est._family.step, []

    def step_then_fail(self, *args, **kwargs):
        calls.append(1)
        if len(calls) > 2:
            raise RuntimeError("boom")
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(est._family, "step", step_then_fail)
    for refit in (lambda: est.fit(X, y), lambda: est.partial_fit(X, y)):
        calls.clear()
        with pytest.raises(RuntimeError, match="boom"):
            refit()
        assert len(calls) == 3  # two steps really ran and changed the posterior in place
        _assert_same_state(before_state, _fitted_state(est))
    monkeypatch.undo()
    for a, b in zip(before_pred, _predictions(est, X[:7])):
        np.testing.assert_array_equal(a, b)


def test_real_failed_refit_of_the_issue_example():
    X, y = reg_data(120, scale=True)
    m = skbayes.SLANGRegressor(hidden_layer_sizes=(8,), max_iter=10, random_state=0).fit(X, y)
    before = m.predict(X[:3], return_std=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputScaleWarning)
        with pytest.raises(ValueError):
            m.fit(X * 1e200, 1000 * y + 50)
    after = m.predict(X[:3], return_std=True)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])


@pytest.mark.parametrize("cls", [skbayes.SLANGClassifier, skbayes.MCDropoutRegressor], ids=lambda c: c.__name__)
def test_invalid_parameter_with_new_width_leaves_the_model_usable(cls):
    X, y = _data(cls)
    est = cls(**SMALL).fit(X, y)
    before = _predictions(est, X[:5])
    est.set_params(max_iter=-1)
    with pytest.raises(InvalidParameterError, match="max_iter"):
        est.fit(np.hstack([X, X]), y)
    assert est.n_features_in_ == X.shape[1]
    for a, b in zip(before, _predictions(est, X[:5])):
        np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_refit_refused_for_cuda_leaves_the_model():
    X, y = reg_data(60, scale=True)
    est = skbayes.VOGNRegressor(**SMALL).fit(X, y)
    before = est.predict(X[:5])
    est.set_params(device="cuda")
    with pytest.raises(InvalidParameterError, match="device must be a torch device available"):
        est.fit(X * 3, y + 1)
    np.testing.assert_array_equal(before, est.predict(X[:5]))


@pytest.mark.parametrize("cls", CLASSIFIERS, ids=lambda c: c.__name__)
def test_failed_first_partial_fit_leaves_an_unfitted_model(cls):
    X, y = clf_data(scale=True)
    est = cls(**SMALL)
    with pytest.raises(ValueError, match="not in classes_"):
        est.partial_fit(X, y, classes=[0, 1])  # y holds label 2
    assert not hasattr(est, "classes_") and not hasattr(est, "n_features_in_")
    with pytest.raises(ValueError, match="classes must be passed"):
        est.partial_fit(X, y)


# --- interrupted fits ------------------------------------------------------------------


def _interrupt_at_epoch(monkeypatch, k):
    real, calls = _loop.run_epoch, []

    def run_epoch(*args, **kwargs):
        calls.append(1)
        if len(calls) == k:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(_loop, "run_epoch", run_epoch)


@pytest.mark.parametrize("cls", [skbayes.SLANGRegressor, skbayes.BBBClassifier, skbayes.NoisyEKFACRegressor])
def test_interrupt_keeps_the_last_completed_epoch(cls, monkeypatch):
    X, y = _data(cls)
    params = dict(SMALL, max_iter=6, tol=0.0)
    ref = cls(**dict(params, max_iter=2)).fit(X, y)
    _interrupt_at_epoch(monkeypatch, 3)
    est = cls(**params)
    with pytest.warns(UserWarning, match="interrupted"), pytest.raises(KeyboardInterrupt):
        est.fit(X, y)
    monkeypatch.undo()
    assert est.n_iter_ == 2 and len(est.loss_curve_) == 2 and est.t_ == ref.t_
    np.testing.assert_array_equal(est.loss_curve_, ref.loss_curve_)
    for a, b in zip(_predictions(ref, X), _predictions(est, X)):
        np.testing.assert_array_equal(a, b)
    # module_ holds the posterior mean and the noise was finalised with it
    mean = torch.cat([p.detach().reshape(-1) for p in est.module_.parameters()])
    torch.testing.assert_close(mean, est.posterior_.mean_t, rtol=0, atol=0)
    if hasattr(ref, "noise_precision_"):
        assert est.noise_precision_ == ref.noise_precision_


def test_interrupt_in_the_first_epoch_restores_the_previous_state(monkeypatch):
    X, y = reg_data(60, scale=True)
    est = skbayes.VadamRegressor(**SMALL)
    _interrupt_at_epoch(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X, y)
    assert not hasattr(est, "posterior_") and not hasattr(est, "n_features_in_")
    monkeypatch.undo()
    est.fit(X, y)
    before_pred, before_state = est.predict(X, return_std=True), pickle.loads(pickle.dumps(_fitted_state(est)))
    _interrupt_at_epoch(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X[:40] * 2, y[:40])
    monkeypatch.undo()
    _assert_same_state(before_state, _fitted_state(est))
    for a, b in zip(before_pred, est.predict(X, return_std=True)):
        np.testing.assert_array_equal(a, b)


# --- thread-safe prediction ------------------------------------------------------------


class _Custom(nn.Module):
    """Not a plain Sequential of Linear layers: takes the generic functional_call path."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.a, self.b = nn.Linear(n_in, 8), nn.Linear(8, n_out)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)) + 0.1 * x[:, :1])


@pytest.mark.parametrize(
    "cls", [skbayes.SLANGRegressor, skbayes.BBBRegressor, skbayes.MCDropoutRegressor, skbayes.NoisyKFACRegressor]
)
def test_concurrent_predictions_with_a_custom_module_equal_serial_ones(cls):
    X, y = reg_data(80, scale=True)
    est = cls(module=_Custom, max_iter=3, predict_samples=6, random_state=0).fit(X, y)
    assert not est._forward.dense
    Xs = [X[i::4] * (1 + 0.1 * i) for i in range(4)]
    serial = [est.predict(x, return_std=True) for x in Xs]
    results, errors = {}, []

    def work(i):
        try:
            for r in range(5):
                results[(i, r)] = est.predict(Xs[i], return_std=True)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for (i, _), (m, s) in results.items():
        np.testing.assert_array_equal(m, serial[i][0])
        np.testing.assert_array_equal(s, serial[i][1])


# --- outputs are finite or an error ----------------------------------------------------


@pytest.mark.parametrize("cls", NETWORKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_extreme_inputs_give_finite_predictions_or_a_clear_error(cls, dtype):
    X, y = _data(cls)
    est = cls(**SMALL, dtype=dtype).fit(X, y)
    for scale in (1e20, 1e300):
        Xe = X[:5] * scale
        try:
            out = _predictions(est, Xe)
        except NonFiniteOutputError as exc:
            assert "outside the range of the training data" in str(exc)
            continue
        for a in out:
            assert np.isfinite(a).all()


# --- warnings that name a bad setup ----------------------------------------------------


@pytest.mark.parametrize("scale", [1e-8, 1e8])
def test_input_scale_warning_names_the_fix(scale):
    X, y = reg_data(60, scale=True)
    with pytest.warns(InputScaleWarning, match="StandardScaler"):
        skbayes.VOGNRegressor(**SMALL).fit(X * scale, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputScaleWarning)
        skbayes.VOGNRegressor(**SMALL).fit(X, y)
        skbayes.VOGNRegressor(**SMALL).fit(reg_data(60)[0], y)  # diabetes' own scale (std 0.05)
        # a constant column shifted by a scaler (an image's blank pixel centred with the others)
        # has a rounding-level std, not a scale
        Xc = np.column_stack([X, np.full(len(X), 0.0)])
        Xc = (Xc - Xc.mean()) / Xc.std()
        assert 0 < Xc[:, -1].std() < 1e-12  # below INPUT_SCALE, yet no scale at all
        skbayes.VOGNRegressor(**SMALL).fit(Xc, y)


def test_poor_fit_warning_on_a_blown_up_fit_and_not_on_a_good_one():
    X, y = reg_data(120, scale=True)
    with pytest.warns(PoorFitWarning, match="learning_rate"):
        skbayes.SLANGRegressor(hidden_layer_sizes=(8,), max_iter=20, learning_rate=1e4, random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PoorFitWarning)
        m = skbayes.SLANGRegressor(hidden_layer_sizes=(8,), max_iter=20, random_state=0).fit(X, y)
        Xc, yc = clf_data(scale=True)
        skbayes.SLANGClassifier(hidden_layer_sizes=(8,), max_iter=20, random_state=0).fit(Xc, yc)
    assert m.score(X, y) > 0.3


def test_rank_beyond_the_number_of_weights_is_clipped_with_a_warning():
    X, y = reg_data(60, scale=True)
    params = dict(SMALL, hidden_layer_sizes=(2,))  # D = 10 * 2 + 2 + 2 + 1 = 25
    with pytest.warns(UserWarning, match="rank=1000 exceeds the number of weights of the network \\(25\\)"):
        big = skbayes.SLANGRegressor(rank=1000, **params).fit(X, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        full = skbayes.SLANGRegressor(rank=25, **params).fit(X, y)
    assert not [w for w in caught if "rank" in str(w.message)]
    np.testing.assert_array_equal(big.predict(X), full.predict(X))


def test_dense_posterior_matrix_beyond_memory_is_refused_before_allocating():
    from skbayes.exceptions import MemoryLimitError
    from skbayes.posteriors import DiagonalGaussian

    post = DiagonalGaussian(torch.zeros(10**6, dtype=torch.float64), torch.ones(10**6, dtype=torch.float64))
    with pytest.raises(MemoryLimitError, match="1000000x1000000"):
        post.covariance(max_size=10**7)  # 30 TB: more than any machine running this


def test_the_default_rank_is_clipped_silently_on_a_tiny_network():
    from skbayes._families.slang import DEFAULT_RANK

    assert skbayes.SLANGRegressor().rank == skbayes.SLANGClassifier().rank == DEFAULT_RANK
    X, y = reg_data(60, scale=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = skbayes.SLANGRegressor(**dict(SMALL, hidden_layer_sizes=(1,))).fit(X[:, :2], y)  # D = 5
    assert est.posterior_.U.shape == (5, 5)
    assert not [w for w in caught if "rank" in str(w.message)]


def test_linear_regression_refuses_to_return_non_finite_predictions():
    X, y = reg_data(60, scale=True)
    est = skbayes.BayesianLinearRegression().fit(X, y)
    far = np.sign(est.coef_)[None, :] * 1e308  # finite inputs whose mean overflows
    for call in (lambda: est.predict(far), lambda: est.predict(X * 1e300, return_std=True)):
        with pytest.raises(NonFiniteOutputError, match="outside the range of the training data"):
            call()
    with pytest.raises(NonFiniteOutputError):
        est.sample_y(far)
    assert np.isfinite(est.predict(X * 1e3, return_std=True)[1]).all()


# --- findings of the fuzz suite (tests/test_fuzz.py), pinned -----------------------------

_rng = np.random.RandomState(0)
_X = _rng.standard_normal((12, 3))
_y = _X @ [1.0, -2.0, 0.5]
_yc = np.arange(12) % 3


@pytest.mark.parametrize("seed", [-1, 2**32, 2**63])
def test_random_state_outside_numpy_range_is_refused_by_name(seed):
    with pytest.raises(InvalidParameterError, match="random_state"):
        skbayes.VOGNRegressor(random_state=seed).fit(_X, _y)


def test_validation_fraction_errors_name_it_and_numpy_floats_work():
    with pytest.raises(ValueError, match="validation_fraction"):
        skbayes.VOGNRegressor(early_stopping=True, validation_fraction=1 - 1e-12).fit(_X, _y)
    est = skbayes.VOGNRegressor(early_stopping=True, validation_fraction=np.float32(0.5), **SMALL).fit(_X, _y)
    assert np.isfinite(est.predict(_X)).all()


def test_custom_module_of_the_wrong_width_is_refused_by_name():
    with pytest.raises(ValueError, match="module fails on rows of 3 features"):
        skbayes.VadamRegressor(module=nn.Linear(5, 1)).fit(_X, _y)
    with pytest.raises(ValueError, match=r"module must map \(n_rows, 3\) inputs to \(n_rows, 3\) outputs"):
        skbayes.VadamClassifier(module=nn.Linear(3, 6)).fit(_X, _yc)
    with pytest.raises(ValueError, match=r"to \(n_rows, 1\) outputs"):
        skbayes.VadamRegressor(module=nn.Linear(3, 4)).fit(_X, _y)


def test_extreme_step_size_schedules_fit_instead_of_overflowing():
    for est in (
        skbayes.SLANGRegressor(lr_decay=1e300, max_iter=3, random_state=0),
        skbayes.NoisyKFACRegressor(learning_rate=1e-300, max_iter=1, random_state=0),
    ):
        assert np.isfinite(est.fit(_X, _y).predict(_X, return_std=True)).all()


def test_a_degenerate_prior_is_a_reported_divergence_or_a_finite_fit_not_a_linalg_error():
    # prior_precision=1e-300: weights without data start at prior + n (the i-BLM start), so the
    # fit may stay finite; if the posterior degenerates it is a reported divergence
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = skbayes.SLANGClassifier(prior_precision=1e-300, hidden_layer_sizes=(4,), max_iter=3, random_state=0)
        est.fit(_X, _yc)
    assert np.isfinite(est.predict_proba(_X)).all()
    if est.diverged_:
        assert any("diverged" in str(w.message) for w in caught)


def test_tiny_prior_that_breaks_iblm_is_named():
    with pytest.raises(ValueError, match="prior_precision"):
        skbayes.NoisyEKFACRegressor(prior_precision=1e-12, hidden_layer_sizes=(4,), max_iter=3, random_state=0).fit(
            _X[:6, :2], _y[:6]
        )


def test_mixed_label_types_get_a_clear_error():
    with pytest.raises(ValueError, match="mixes labels of different types"):
        skbayes.VOGNClassifier().fit(_X[:6], np.array(["a", 1, "a", 1, "b", 2], dtype=object))


def test_read_only_inputs_are_copied_not_shared_with_torch():
    X = _X.copy()
    X.setflags(write=False)
    est = skbayes.VOGNRegressor(**SMALL).fit(X, _y)
    assert est._tensor(X).data_ptr() != X.ctypes.data  # torch's "not writable" warning is once per process
    W = _X.copy()
    assert est._tensor(W).data_ptr() == W.ctypes.data  # writable float64 inputs are not copied
    np.testing.assert_array_equal(est.predict(X), est.predict(W))


@pytest.mark.parametrize("scale_X, scale_y", [(1.0, 1e-300), (1.0, 1e300), (1e-300, 1.0)])
def test_linear_regression_refuses_unrepresentable_scales(scale_X, scale_y):
    with pytest.raises(ValueError, match="outside \\[1e-150, 1e\\+150\\]"):
        skbayes.BayesianLinearRegression().fit(_X[:5, :1] * scale_X, _y[:5] * scale_y)


@pytest.mark.parametrize("name", ["NoisyKFACRegressor", "NoisyEKFACClassifier"])
def test_kronecker_fits_continue_after_a_restored_snapshot(name):
    """Early stopping restores the best epoch's posterior from a deep copy, whose layer list
    held copies of the network's modules: the forward hooks then captured nothing and a
    following partial_fit / warm-start fit raised "`inputs` argument to `grad()` cannot be
    empty". The step now rebinds the layers to the modules the forward pass calls."""
    X, y = clf_data(scale=True) if "Classifier" in name else reg_data(200, scale=True)
    est = getattr(skbayes, name)(
        hidden_layer_sizes=(8,), early_stopping=True, n_iter_no_change=2, max_iter=30, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
        before = est.posterior_.mean.copy()
        est.partial_fit(X, y)
        assert not np.array_equal(est.posterior_.mean, before)  # the step ran and moved the mean
        est.set_params(warm_start=True, early_stopping=False, max_iter=2).fit(X, y)
    assert np.all(np.isfinite(est.predict(X)))
