"""skbayes.preprocessing.ImageScaler: the means and the one scale against numpy, the round trip,
scikit-learn's estimator checks, and what it does for a factorised posterior on real images."""

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skbayes.preprocessing import ImageScaler


def _images(seed=0, n=40, side=6):
    """Random 'images' on [0, 1] whose border is blank, as in Fashion-MNIST and digits."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, size=(n, side, side))
    X[:, 0, :] = X[:, :, 0] = 0.0
    return X.reshape(n, -1)


@pytest.mark.parametrize("centering", ["global", "pixel", None])
def test_transform_matches_a_dense_reference(centering):
    X = _images()
    X_copy = X.copy()
    sc = ImageScaler(centering=centering).fit(X)
    if centering == "global":
        mean, scale = X.mean(), np.sqrt(((X - X.mean()) ** 2).mean())
    elif centering == "pixel":
        mean = X.mean(0)
        scale = np.sqrt(((X - mean) ** 2).mean())  # the RMS of the per-column centred values
    else:
        mean, scale = 0.0, np.sqrt(((X - X.mean()) ** 2).mean())
    np.testing.assert_allclose(sc.mean_, mean, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(sc.scale_, scale, rtol=1e-12)
    Z = sc.transform(X)
    np.testing.assert_allclose(Z, (X - mean) / scale, rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(X, X_copy)  # the input is not modified
    np.testing.assert_allclose(sc.inverse_transform(Z), X, rtol=1e-12, atol=1e-13)
    # one scale: the transformed values have unit root mean square about the mean subtracted
    # ('pixel': about each column's mean; 'global': about the overall mean)
    if centering is not None:
        assert np.sqrt((Z**2).mean()) == pytest.approx(1.0, rel=1e-12)


def test_blank_pixels_stay_zero_unless_centred_as_a_whole():
    X = _images()
    blank = (X == 0).all(0)
    assert blank.sum() == 11
    assert np.all(ImageScaler(centering=None).fit_transform(X)[:, blank] == 0.0)
    assert np.all(ImageScaler(centering="pixel").fit_transform(X)[:, blank] == 0.0)
    Z = ImageScaler(centering="global").fit_transform(X)[:, blank]
    assert np.all(Z < 0) and np.ptp(Z) == 0.0  # the same negative value in every image


def test_float32_is_kept_and_constant_data_gets_unit_scale():
    X = _images().astype(np.float32)
    for centering in ("global", "pixel", None):
        Z = ImageScaler(centering=centering).fit_transform(X)
        assert Z.dtype == np.float32
    C = np.full((5, 4), 3.0)
    sc = ImageScaler().fit(C)
    assert sc.scale_ == 1.0
    np.testing.assert_array_equal(sc.transform(C), 0.0)


def test_bad_input_is_rejected():
    sc = ImageScaler().fit(_images())
    with pytest.raises(ValueError, match="features"):
        sc.transform(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="NaN"):
        ImageScaler().fit(np.array([[0.0, np.nan], [1.0, 2.0]]))
    with pytest.raises(ValueError, match="centering"):
        ImageScaler(centering="row").fit(_images())


@parametrize_with_checks([ImageScaler(), ImageScaler(centering="pixel"), ImageScaler(centering=None)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_blank_pixel_weights_of_a_diagonal_posterior_follow_the_centring():
    """On the 8x8 digits (10 pixels blank in training), a diagonal posterior (VOGN) is as sure
    of the blank pixels' first-layer weights as of the others when the images are centred as a
    whole, and less sure when each pixel is centred (docs/defaults_protocol.md, "Blank pixels and
    factorised posteriors")."""
    from sklearn.datasets import load_digits

    from skbayes import VOGNClassifier

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    blank = X.std(0) < 0.01
    assert blank.sum() >= 5
    ratios = {}
    for centering in ("global", "pixel"):
        Z = ImageScaler(centering=centering).fit_transform(X)
        est = VOGNClassifier(hidden_layer_sizes=(20,), max_iter=30, random_state=0).fit(Z, y)
        W = next(est.module_.parameters())  # (20, 64), the first block of the flat posterior
        sd = np.sqrt(np.asarray(est.posterior_.variance())[: W.numel()].reshape(tuple(W.shape)))
        ratios[centering] = sd[:, blank].mean() / sd[:, ~blank].mean()
    assert ratios["global"] < 1.3
    assert ratios["pixel"] > 1.5 * ratios["global"]
