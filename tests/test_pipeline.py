"""``skbayes.pipeline``: a Pipeline that forwards the predictive methods to its final estimator."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification, make_regression
from sklearn.decomposition import PCA
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.pipeline import make_pipeline as sk_make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianLinearRegression, SLANGClassifier, VOGNRegressor
from skbayes.metrics import get_scorer
from skbayes.pipeline import BayesianPipeline, make_pipeline

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _regression():
    X, y = make_regression(n_samples=120, n_features=5, noise=3.0, random_state=0)
    return X * [1.0, 10.0, 100.0, 0.1, 1.0] + 5.0, y  # scales a StandardScaler changes


def test_make_pipeline_is_sklearns_with_the_forwards():
    steps = [StandardScaler(), PCA(n_components=4), VOGNRegressor(max_iter=5)]
    ours, theirs = make_pipeline(*steps), sk_make_pipeline(*steps)
    assert isinstance(ours, BayesianPipeline) and isinstance(ours, Pipeline)
    assert [n for n, _ in ours.steps] == [n for n, _ in theirs.steps]
    assert ours.get_params(deep=False).keys() == theirs.get_params(deep=False).keys()
    assert make_pipeline(StandardScaler(), verbose=True).verbose is True


@pytest.mark.parametrize(
    "final", [VOGNRegressor(max_iter=10, random_state=0), BayesianLinearRegression()], ids=lambda e: type(e).__name__
)
def test_forwarded_methods_equal_the_final_steps_on_transformed_inputs(final):
    X, y = _regression()
    pipe = make_pipeline(StandardScaler(), PCA(n_components=4), final).fit(X, y)
    Xq = X[:7]
    Xt = pipe[:-1].transform(Xq)
    est = pipe[-1]
    for got, expected in [
        (pipe.predict_interval(Xq, level=0.8), est.predict_interval(Xt, level=0.8)),
        (pipe.predict_quantiles(Xq, [0.1, 0.7]), est.predict_quantiles(Xt, [0.1, 0.7])),
        (pipe.sample_y(Xq, n_samples=3, random_state=1), est.sample_y(Xt, n_samples=3, random_state=1)),
    ]:
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(pipe.predict(Xq), est.predict(Xt))
    if hasattr(est, "log_likelihood"):
        assert pipe.log_likelihood(Xq, y[:7]) == est.log_likelihood(Xt, y[:7])
        np.testing.assert_array_equal(pipe.sample_outputs(Xq, n_samples=4), est.sample_outputs(Xt, n_samples=4))
        np.testing.assert_array_equal(pipe.predict_std(Xq), est.predict_std(Xt))
    else:  # BayesianLinearRegression has no log_likelihood or sample_outputs: neither has its pipeline
        assert not hasattr(pipe, "log_likelihood") and not hasattr(pipe, "sample_outputs")


def test_methods_exist_only_where_the_final_estimator_has_them():
    X, y = make_classification(n_samples=80, n_features=4, random_state=0)
    clf = make_pipeline(StandardScaler(), SLANGClassifier(max_iter=3, random_state=0)).fit(X, y)
    for name in ("predict_interval", "predict_quantiles", "log_likelihood", "sample_y"):
        assert not hasattr(clf, name)
    np.testing.assert_array_equal(clf.predict_std(X[:5]), clf[-1].predict_std(clf[:-1].transform(X[:5])))
    assert clf.sample_outputs(X[:5], n_samples=2).shape == (2, 5, 1)
    assert hasattr(clf, "predict_proba")


def test_grid_search_clone_and_pickle_keep_it():
    X, y = _regression()
    pipe = make_pipeline(StandardScaler(), VOGNRegressor(max_iter=5, random_state=0))
    assert type(clone(pipe)) is BayesianPipeline
    search = GridSearchCV(
        pipe, {"vognregressor__prior_precision": [0.5, 2.0]}, cv=2, scoring=get_scorer("log_likelihood")
    )
    search.fit(X, y)
    best = search.best_estimator_
    assert type(best) is BayesianPipeline
    again = pickle.loads(pickle.dumps(best))
    np.testing.assert_array_equal(again.predict_interval(X[:4]), best.predict_interval(X[:4]))
