"""scikit-learn's own estimator checks on every public estimator."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from skbayes import NoisyKFACClassifier, SLANGRegressor, all_estimators

# Small, fast configurations: the checks fit hundreds of times on tiny data.
_FAST = dict(hidden_layer_sizes=(10,), max_iter=50, predict_samples=10, random_state=0)
ESTIMATORS = [e.estimator(**_FAST) for e in all_estimators(network=True)]
# kl_weight as a list of candidates: every fit also fits each candidate on the held-out split
_CANDIDATES = [
    NoisyKFACClassifier(kl_weight=[0.3, 1.0], **_FAST),
    SLANGRegressor(kl_weight=["auto", 1.0], **_FAST),
]


#: Checks a stochastic network cannot pass, and why (scikit-learn marks them xfail).
EXPECTED_FAILED_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data": (
        "a fit on rows repeated w_i times and a fit with sample_weight=w on the (shuffled) rows "
        "follow different random paths: each epoch draws its row order with torch.randperm(n_rows) "
        "from the generator that then draws the Monte Carlo weight samples (and dropout masks), "
        "so the streams differ with n_rows, and init='iblm' draws its local minibatches from the "
        "rows; the fits agree in expectation, not to rtol=1e-7. With the row order fixed, "
        "init='default' and no per-row random draws the check passes for SLANG, VOGN, Vadam, BBB, "
        "MC dropout and noisy K-FAC (tests/test_sample_weight.py); not for noisy EK-FAC, whose "
        "Kronecker factors of 15 rows x 30 features have repeated eigenvalues, so the eigenbasis "
        "that maps the normal draws to weight samples depends on rounding."
    ),
}


@parametrize_with_checks(ESTIMATORS + _CANDIDATES, expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_docstrings_list_every_parameter_and_fitted_attribute():
    """numpydoc: every constructor parameter is documented, and so are the fitted attributes
    every estimator sets (and, for regressors, noise_precision_; classifiers, classes_)."""
    import inspect
    import re

    from skbayes import BayesianLinearRegression

    for est in ESTIMATORS + [BayesianLinearRegression()]:
        cls = type(est)
        doc = cls.__doc__
        params, _, attrs = doc.partition("Attributes\n    ----------")
        for name in inspect.signature(cls.__init__).parameters:
            if name != "self":
                assert re.search(rf"\n    {name} : ", params), (cls.__name__, name)
        if cls is BayesianLinearRegression:
            continue
        wanted = ["n_features_in_", "n_iter_", "loss_curve_", "module_", "posterior_"]
        wanted.append("classes_" if "Classifier" in cls.__name__ else "noise_precision_")
        for name in wanted:
            assert re.search(rf"\n    {name} : ", attrs), (cls.__name__, name)
