"""float32 computation: the default start and every family fit standardised data as in float64."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import skbayes
from skbayes._start.batched_blr import blr_log_evidence, blr_solve

NETWORK_ESTIMATORS = [getattr(skbayes, n) for n in skbayes.__all__ if n.endswith(("Regressor", "Classifier"))]
EPS32 = torch.finfo(torch.float32).eps


def _is_clf(cls):
    return cls.__name__.endswith("Classifier")


def _standardised(cls):
    X, y = (load_breast_cancer if _is_clf(cls) else load_diabetes)(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _fit(cls, X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter warnings of the short fits
        return cls(**params).fit(X, y)


@pytest.mark.parametrize("cls", NETWORK_ESTIMATORS, ids=lambda c: c.__name__)
def test_default_start_in_float32_is_the_float64_start(cls):
    """The i-BLM start (the default) on all of standardised diabetes / breast cancer, with the
    default network: float32 gives the float64 posterior mean up to rounding. Its regressions
    are solved in float64 on the float32 layer inputs, so the difference is the float32
    rounding of the inputs and of the forward passes, amplified by the regressions'
    conditioning: measured 9 eps (regression) and 3 eps (classification); 100 eps allowed."""
    X, y = _standardised(cls)
    m32, m64 = (
        _fit(cls, X, y, dtype=dt, max_iter=0, random_state=0).posterior_.mean_t.double().numpy()
        for dt in ("float32", "float64")
    )
    assert np.all(np.isfinite(m32))
    assert np.max(np.abs(m32 - m64)) <= 100 * EPS32 * np.max(np.abs(m64))


def test_blr_solves_in_float64_for_float32_inputs():
    """The regression engine promotes float32 designs to float64 and casts the results back:
    a nearly collinear design (the inputs of an i-BLM layer, whose units regress on the same
    targets) with a small noise variance, whose precision matrix has a condition number
    beyond 1 / eps32, factorises, and agrees with the float64 solve to float32 rounding."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(128, 1, generator=g, dtype=torch.float64)
    X64 = base + 1e-4 * torch.randn(128, 51, generator=g, dtype=torch.float64)  # 51 collinear columns
    y64 = base[:, 0] + 0.1 * torch.randn(128, generator=g, dtype=torch.float64)
    v = 1e-4  # the small end of the evidence grid
    X32, y32 = X64.float(), y64.float()
    P32 = X32.T @ X32 / v + torch.eye(51, dtype=torch.float32)
    assert float(torch.linalg.cond(P32.double())) > 10 / EPS32
    assert int(torch.linalg.cholesky_ex(P32).info) > 0  # a float32 solve fails
    m32, p32 = blr_solve(X32, y32, 1.0, v)
    m64, p64 = blr_solve(X32.double(), y32.double(), 1.0, v)  # the same (rounded) data in float64
    assert m32.dtype == p32.dtype == torch.float32
    np.testing.assert_allclose(m32.numpy(), m64.float().numpy(), rtol=0, atol=2 * EPS32 * float(m64.abs().max()))
    np.testing.assert_allclose(p32.numpy(), p64.float().numpy(), rtol=EPS32, atol=0)
    e32, e64 = blr_log_evidence(X32, y32, 1.0, v), blr_log_evidence(X32.double(), y32.double(), 1.0, v)
    assert float(e32) == float(e64)


@pytest.mark.parametrize("cls", NETWORK_ESTIMATORS, ids=lambda c: c.__name__)
def test_float32_fits_as_well_as_float64(cls):
    """Held-out score after a short fit (70/30 split, (16,) network, 15 epochs), the mean of
    two seeds per dtype: float32 within the seed-to-seed noise of float64. Measured in this
    setting (4 seeds, 20 epochs): seed standard deviations up to 0.065 R^2 (VOGN; 0.03 or less
    for the others) and 0.021 nats of log-loss; float32 - float64 differences up to 0.06 R^2
    and 0.044 nats at one seed. Allowed: 0.1 R^2, 0.05 nats."""
    X, y = (load_breast_cancer if _is_clf(cls) else load_diabetes)(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    sc = StandardScaler().fit(Xtr)
    Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
    scores = {}
    for dtype in ("float32", "float64"):
        s = []
        for seed in (0, 1):
            est = _fit(cls, Xtr, ytr, dtype=dtype, hidden_layer_sizes=(16,), max_iter=15, random_state=seed)
            s.append(-log_loss(yte, est.predict_proba(Xte)) if _is_clf(cls) else est.score(Xte, yte))
        scores[dtype] = np.mean(s)
    tol = 0.05 if _is_clf(cls) else 0.1
    assert abs(scores["float32"] - scores["float64"]) <= tol, scores


def test_values_beyond_float32_name_the_cause():
    """Finite inputs beyond float32's range, and inputs whose squares overflow it: a clear
    error that names the dtype and the fix, not a singular-matrix message."""
    X, y = _standardised(skbayes.VOGNRegressor)
    for scale, match in ((1e100, "beyond the range of dtype='float32'"), (1e20, "overflow dtype='float32'")):
        with pytest.raises(ValueError, match=match) as info:
            _fit(skbayes.VOGNRegressor, X * scale, y, dtype="float32", hidden_layer_sizes=(8,), max_iter=0)
        assert "dtype='float64'" in str(info.value) and "standardise X" in str(info.value)


def test_vadam_bias_correction_survives_float32_near_the_map():
    """Vadam's bias-corrected average of squared gradients, read off ``s - gamma_2^t s0``, cancelled
    in float32 when the start ``s0`` (1 with init='default') is far above the squared gradients:
    near the MAP (``kl_weight=1e-6``, so that the ``lambda / N`` in the denominator is ~1e-8)
    the mean jumped to |mu| ~ 3e4 within 5 epochs and the fit predicted at chance. Kept apart,
    the data's average gives a float32 fit with weights of the float64 fit's size that
    classifies the held-out rows as well (the two dtypes draw different weight samples, so
    the fits agree in distribution, not to rounding)."""
    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    sc = StandardScaler().fit(Xtr)
    Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
    kw = dict(hidden_layer_sizes=(10,), kl_weight=1e-6, init="default", max_iter=5, tol=None, random_state=0)
    fits = {dt: _fit(skbayes.VadamClassifier, Xtr, ytr, dtype=dt, **kw) for dt in ("float32", "float64")}
    size = {dt: float(np.abs(np.asarray(e.posterior_.mean, dtype=float)).max()) for dt, e in fits.items()}
    assert size["float32"] < 3 * size["float64"], size
    acc = {dt: e.score(Xte, yte) for dt, e in fits.items()}
    assert acc["float32"] >= acc["float64"] - 0.03 and acc["float64"] > 0.9, acc
