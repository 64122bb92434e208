"""scikit-learn's own estimator checks on every public estimator."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from skbayes import (
    BBBClassifier,
    BBBRegressor,
    MCDropoutClassifier,
    MCDropoutRegressor,
    NoisyEKFACClassifier,
    NoisyEKFACRegressor,
    NoisyKFACClassifier,
    NoisyKFACRegressor,
    SLANGClassifier,
    SLANGRegressor,
    VadamClassifier,
    VadamRegressor,
    VOGNClassifier,
    VOGNRegressor,
)

# Small, fast configurations: the checks fit hundreds of times on tiny data.
_FAST = dict(hidden_layer_sizes=(10,), max_iter=50, predict_samples=10, random_state=0)
ESTIMATORS = [
    SLANGRegressor(**_FAST),
    SLANGClassifier(**_FAST),
    NoisyKFACRegressor(**_FAST),
    NoisyKFACClassifier(**_FAST),
    NoisyEKFACRegressor(**_FAST),
    NoisyEKFACClassifier(**_FAST),
    VOGNRegressor(**_FAST),
    VOGNClassifier(**_FAST),
    VadamRegressor(**_FAST),
    VadamClassifier(**_FAST),
    BBBRegressor(**_FAST),
    BBBClassifier(**_FAST),
    MCDropoutRegressor(**_FAST),
    MCDropoutClassifier(**_FAST),
]


@parametrize_with_checks(ESTIMATORS)
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
