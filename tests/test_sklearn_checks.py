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
