"""Docstrings from one registry of parameter and attribute entries.

An entry is a type description and a text; the default shown in a docstring is
read from the estimator's ``__init__`` signature, and parameters are listed in
signature order. Lookup order for a name: the estimator class's own
``_param_docs`` (regression / classification faces), then its family's
``param_docs``, then the shared entries below.
"""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    """One numpydoc entry: ``name : type[, default=...]`` and its description."""

    type: str
    text: str


def E(type_: str, text: str) -> Entry:
    """An entry with its text dedented (write texts as indented triple-quoted strings)."""
    return Entry(type_, textwrap.dedent(text).strip("\n"))


def _predict_samples_entry(lead: str, bias: str) -> Entry:
    """``predict_samples`` of a face: its ``lead`` and ``bias`` sentences around the wording both
    faces share (what 'auto' stands for, how the draws are made)."""
    auto = """
        'auto': 1000 on networks of up to 4,000 weights, ``4,000,000 // D`` on a network
        of ``D`` weights above that and 100 from 40,000 weights on (prediction time is
        linear in it)."""
    draws = """
        They are drawn from float32 random numbers, in a float64 model too (the same
        distribution up to float32's resolution, and several times faster to draw)."""
    text = "\n".join(textwrap.dedent(t).strip("\n") for t in (lead, auto, bias, draws))
    return Entry("int or 'auto'", text)


#: Parameters shared by every network estimator, in their generic wording.
PARAMS: dict[str, Entry] = {
    "hidden_layer_sizes": E(
        "tuple of int",
        """
        Widths of the hidden layers of the fully connected network built when
        ``module`` is None. ``()`` gives a linear model (Bayesian linear or
        logistic regression).""",
    ),
    "activation": E(
        "{'relu', 'tanh', 'logistic', 'identity', 'elu', 'gelu', 'softplus', 'leaky_relu'}",
        """
        Hidden-layer activation of the built network.""",
    ),
    "module": E(
        "callable or torch.nn.Module",
        """
        A custom network instead of the built one: a callable
        ``module(n_features_in, n_outputs)`` returning a ``torch.nn.Module``
        (a class works), or a module instance (deep-copied, never modified). The
        ``Linear`` and convolution layers of a module built by a callable are
        initialised from ``random_state`` (PyTorch's default scheme); a module instance
        keeps its weights.
        It receives float tensors of shape ``(batch, n_features_in)``; a conv net
        reshapes them itself (e.g. with ``torch.nn.Unflatten``). Batch normalisation
        layers are rejected (they make a row's output depend on the other rows). A
        ``torch.nn.Sequential`` of ``Linear`` layers and element-wise activations
        runs all weight samples of a step in one batched pass; any other module
        runs one ``functional_call`` per weight sample.""",
    ),
    "prior_precision": E(
        "float or 'auto'",
        """
        Precision ``lambda`` of the isotropic Gaussian prior ``N(0, lambda^{-1} I)``
        on every weight and bias. 'auto' learns one precision per parameter group
        (each layer's weight and bias separately) by empirical Bayes: after every
        epoch, the ELBO's maximiser ``lambda_g = (n_g + 1) / (E_q||theta_g||^2 + 1)``
        (a ``Gamma(1.5, 0.5)`` hyperprior), starting from 1; the values are in
        ``prior_precision_``. On small networks it is not better than 1 at the
        defaults (see the :doc:`benchmarks page </benchmarks>`), hence not the default yet.""",
    ),
    "learning_rate": E(
        "float",
        """
        Step size of the mean update.""",
    ),
    "kl_weight": E(
        "float, 'auto' or list",
        """
        Tempering weight ``w > 0``: the fit maximises
        ``E_q[log p(y | X, theta)] - w KL(q || prior)``. ``w = 1`` is the exact
        ELBO (the Bayesian posterior); ``w < 1`` gives a colder posterior that
        approaches the MAP under the same prior as ``w -> 0``. Divided by ``w``
        this is the ELBO of the likelihood raised to ``1 / w``, so the method's
        update is unchanged except that every data statistic (gradients and
        curvature, scaled to the ``n_samples`` examples) counts ``1 / w`` times
        against the prior precision and the entropy: for a linear-Gaussian model
        the optimum has precision ``prior_precision I + H / w`` (``H`` the data's
        Gauss-Newton matrix), the same mean as the prior
        ``w * prior_precision`` gives, and ``w`` times its covariance. See
        :ref:`Tempering <tempering-section>` in the SLANG page of the documentation.
        'auto' is the value the defaults protocol chose for this estimator: {auto_kl_weight}
        A list of two or more candidates (numbers or 'auto'), e.g. ``['auto', 1.0]``,
        chooses the value per data set: ``fit`` holds out ``validation_fraction`` of the
        rows (stratified for a classifier, every class keeping a training row; the split
        drawn from ``random_state``), fits a
        copy of the estimator at each candidate on the rest, and keeps the first
        candidate unless another predicts the held-out rows better (mean log predictive
        density) by more than one standard error of the rows' paired differences; then
        it fits all the rows at the chosen value (``kl_weight_``; the scores in
        ``kl_weight_scores_``). That costs about ``1 + 0.9 k`` fits for ``k`` candidates.
        ``partial_fit`` and a warm-started ``fit`` train at the last choice (before any,
        or after a fit at one value, at the first candidate). It pays on classification data whose classes overlap;
        on regression data the default is better kept. See :ref:`Choosing the
        temperature per data set <kl-weight-choice-section>` in the documentation.""",
    ),
    "max_iter": E(
        "'auto' or int",
        """
        Maximum number of epochs (passes over the training data); the fit stops
        earlier by its rule (``tol``, ``n_iter_no_change``, ``early_stopping``) and
        warns (``ConvergenceWarning``) when it reaches ``max_iter`` first.
        ``'auto'`` allows enough epochs for 10,000 optimiser steps, at least 200
        and at most 1000 epochs: the methods' step sizes and moving averages count
        steps, and a small data set has few steps per epoch (diabetes at the default
        minibatch: 6, so 1000 epochs). It is the default of every network estimator
        but Vadam/Vprop, which train a budget of 200 epochs (``tol=None``): their
        precision, a moving average of squared minibatch gradients, relaxes towards
        the prior over thousands of steps, and the converged posterior predicts
        worse than the one at 200 epochs (see :ref:`Stopping <stopping-section>` in
        the SLANG page).
        ``0`` only initialises the posterior (see ``init``) and trains no epoch.""",
    ),
    "batch_size": E(
        "int or 'auto'",
        """
        Minibatch size ``M``; 'auto' is ``min({auto}, n_samples)``. Clipped to the
        number of training samples.""",
    ),
    "mc_samples": E(
        "int",
        """
        Weight samples ``S`` per training step.""",
    ),
    "predict_samples": _predict_samples_entry(
        """
        Weight samples averaged by the prediction methods, whose predictive is their
        mixture.""",
        """
        The mixture's log density is a Monte Carlo estimate biased downwards, less with
        more samples, most beyond the data: ``MCDropoutRegressor`` defaults to 'auto'
        (Boston beyond the data: -5.22 at 100 samples, -4.75 at 1000), the other
        regressors to 100, where 1000 did not pass the defaults protocol's bar.""",
    ),
    "init": E(
        "{'iblm', 'iblm_random', 'default', 'uninformative', 'heuristic', 'xavier', 'orthogonal', 'lsuv'}",
        """
        Initialisation of the posterior. 'iblm' (Rossi et al., 2019): layer by
        layer from the input, each unit's weights get the posterior of a Bayesian
        linear regression of the targets on the layer's inputs (hidden units on
        a minibatch local in the layer's input space, so that units differ; the
        output layer on a random one). 'iblm_random': the same with the paper's
        random minibatches for every layer. 'default': PyTorch's initialisation.
        The others are the i-BLM paper's baselines (see the :doc:`initialisation page
        </init>` of the documentation).""",
    ),
    "iblm_batch_size": E(
        "int",
        """
        Rows of the minibatch each i-BLM regression uses (and LSUV's minibatch).""",
    ),
    "kl_annealing": E(
        "tuple (gamma, a, b) or None",
        """
        A schedule on the KL weight (App. E.9 of the i-BLM paper): at step ``t``
        the weight is ``kl_weight * gamma / (1 + exp(-a (t - b)))`` (floored at
        1e-8), entering the update and the reported objective exactly as
        ``kl_weight`` does, so the fit starts near the MAP and warms towards the
        tempered posterior. Unlike a smaller ``prior_precision``, a small weight
        also narrows the directions the data determine.""",
    ),
    "noise_precision": E(
        "'auto' or float",
        """
        Precision of the Gaussian observation noise, in the units of ``y``
        (1 / noise variance). 'auto' learns it: a Gamma prior ``noise_prior`` on
        the standardised scale and a Gamma variational posterior, updated after
        every step by the conjugate natural-gradient (SVI) step. A float fixes it.""",
    ),
    "noise_prior": E(
        "tuple (shape, rate)",
        """
        Gamma prior on the noise precision of the standardised targets, used
        with ``noise_precision='auto'``. A prior ``Gamma(a, b)`` acts like ``2 a``
        pseudo-observations with squared residuals summing to ``2 b``. The default
        is vague, so that low-noise data reach a small noise level; ``(6, 6)``,
        the noisy EK-FAC paper's UCI prior, holds the noise of a small data set
        near the targets' variance.""",
    ),
    "warm_start": E(
        "bool",
        """
        Continue from the previous posterior (and optimiser state) when ``fit``
        is called again, applying the parameters changed since. After a change of a
        parameter that fixes the network or the posterior's structure
        (``hidden_layer_sizes``, ``activation``, ``module``, ``dtype``, ``device``, MC
        dropout's rates) the fit warns and starts afresh (``partial_fit`` raises).""",
    ),
    "early_stopping": E(
        "bool",
        """
        Hold out ``validation_fraction`` of the training data and stop when its
        log-likelihood under the predictive that predictions take (the linearised
        one where ``predictive`` is or stands for 'glm', else the average over 16
        weight samples) has not improved by ``tol`` for ``n_iter_no_change``
        epochs; the best posterior is kept.""",
    ),
    "validation_fraction": E(
        "float",
        """
        Fraction of the training data held out for early stopping, and for choosing
        among candidate ``kl_weight`` values where the estimator has them (a
        classifier's split is stratified, and every class keeps a training row).""",
    ),
    "n_iter_no_change": E(
        "int",
        """
        Epochs without improvement (of the training objective, or of the
        validation score with ``early_stopping``) before training stops.""",
    ),
    "tol": E(
        "float or None",
        """
        Minimum improvement of the per-example training objective (or of the
        validation log-likelihood) that counts. ``None``: no tolerance rule; the
        fit trains ``max_iter`` epochs and does not warn when it reaches them (as
        scikit-learn's ``SGDClassifier``), and with ``early_stopping`` keeps the
        best validation epoch without stopping early.""",
    ),
    "random_state": E(
        "int, RandomState instance or None",
        """
        Seeds the network initialisation, minibatch order, weight sampling and
        the prediction samples. Predictions of a fitted model are always
        deterministic; pass an int for reproducible fits.""",
    ),
    "device": E(
        "str",
        """
        Torch device, e.g. 'cuda'.""",
    ),
    "dtype": E(
        "{'float64', 'float32'}",
        """
        Floating-point precision of the computation.""",
    ),
    "verbose": E(
        "bool",
        """
        Show a progress bar with the running training objective.""",
    ),
    "n_threads": E(
        "int or None",
        """
        Torch's intra-op CPU threads for ``fit``, ``partial_fit`` and the
        prediction methods, set for the call and restored afterwards. None
        chooses from the size of the work: one thread per ``1e7``
        multiply-adds of a network pass over the rows processed together (a
        minibatch times ``mc_samples`` in training), so small networks run on
        one thread, and never more than ``torch.get_num_threads()``. An int
        uses exactly that many threads. Both are capped by the share of the
        cores a dask worker or the ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``
        environment variables give the process. See the :ref:`threads section
        <threads-section>` of the documentation.""",
    ),
    "predictive": E(
        "{'sampled', 'glm', 'auto'}",
        """
        How predictions integrate over the posterior. 'sampled': Monte Carlo over
        ``predict_samples`` weight samples. 'glm': the network linearised at the
        posterior mean, ``f(x; theta) ~ f(x; mu) + J(x) (theta - mu)``, whose outputs
        are Gaussian with mean ``f(x; mu)`` and covariance ``J(x) Sigma J(x)^T``,
        computed from the posterior's structure without forming ``Sigma``. Regressors
        then predict the mean ``f(x; mu)`` and the standard deviation
        ``sqrt(J Sigma J^T + noise_std_**2)``, and ``log_likelihood`` is that Gaussian's
        density; classifiers take the probit approximation of the expected sigmoid
        (two classes) or of every pairwise difference of the logits; ``sample_y``, ``sample_outputs`` and the
        classifiers' ``predict_std`` use ``predict_samples`` draws of the Gaussian
        outputs. 'auto' is the predictive the defaults protocol chose for this
        estimator: {auto_predictive} Can be changed with ``set_params`` after fitting.""",
    ),
}

#: Fitted attributes shared by every network estimator, in docstring order.
ATTRS: dict[str, Entry] = {
    "n_features_in_": E(
        "int",
        """
        Number of features seen during fit.""",
    ),
    "feature_names_in_": E(
        "ndarray of shape (`n_features_in_`,)",
        """
        Feature names seen during fit (only for inputs with string column names).""",
    ),
    "n_iter_": E(
        "int",
        """
        Epochs run.""",
    ),
    "t_": E(
        "int",
        """
        Training steps (minibatch updates) run.""",
    ),
    "loss_curve_": E(
        "list of float",
        """
        Negative ELBO per epoch, divided by the number of training examples:
        the average minibatch estimate of ``E_q[-log p(y | X, theta)]`` over the
        epoch plus ``kl_weight`` (times the ``kl_annealing`` factor) times
        ``KL(q || prior)`` at its end (regressors: on standardised targets,
        including the noise precision's terms).""",
    ),
    "validation_scores_": E(
        "list of float",
        """
        Validation log-likelihood per epoch (only with ``early_stopping``).""",
    ),
    "best_validation_score_": E(
        "float",
        """
        Best validation score (only with ``early_stopping``).""",
    ),
    "diverged_": E(
        "bool",
        """
        True when the last ``fit`` or ``partial_fit`` stopped because training
        diverged (the posterior was reverted to the end of the last good epoch
        and a ``ConvergenceWarning`` was issued).""",
    ),
    "kl_weight_": E(
        "float",
        """
        The tempering weight of the fit: ``kl_weight`` with 'auto' resolved, or the
        candidate ``fit`` chose when ``kl_weight`` is a list. Only estimators with
        ``kl_weight``.""",
    ),
    "kl_weight_scores_": E(
        "ndarray of shape (n_candidates,)",
        """
        Only when ``kl_weight`` is a list: each candidate's mean log predictive density
        of the held-out rows (``-inf`` for a fit that diverged), in the order of
        ``kl_weight``.""",
    ),
    "prior_precision_": E(
        "dict of str to float",
        """
        The weight prior's precision per parameter group (name: precision), as
        learned with ``prior_precision='auto'`` (else the fixed value for every
        group).""",
    ),
    "module_": E(
        "torch.nn.Module",
        """
        The network, holding the posterior mean as its parameters.""",
    ),
    "posterior_": E(
        "object",
        """
        The variational posterior.""",
    ),
}

#: Attributes of the regression face.
REGRESSOR_ATTRS: dict[str, Entry] = {
    "noise_precision_": E(
        "float or ndarray of shape (n_targets,)",
        """
        Posterior mean of the noise precision, in the units of ``y`` (one per
        target after a fit on a 2-D ``y``).""",
    ),
    "noise_std_": E(
        "float or ndarray of shape (n_targets,)",
        """
        Noise standard deviation used by the predictions, ``sqrt(E_q[1 / tau])``
        in the units of ``y``: ``predict(X, return_std=True)`` returns
        ``sqrt(Var_q[f(x)] + noise_std_**2)`` (per target after a fit on a 2-D ``y``).""",
    ),
}

#: Parameters of the classification face (override the shared entries).
CLASSIFIER_PARAMS: dict[str, Entry] = {
    "predict_samples": _predict_samples_entry(
        """
        Weight samples averaged by the prediction methods.""",
        """
        The averaged probabilities are Monte Carlo estimates whose log-loss is biased
        upwards, less with more samples; at the strongest shift 100 samples were 0.3-5
        nats above 1000 on digits.""",
    ),
    "glm_link": E(
        "{'pairwise', 'probit', 'mc'}",
        """
        How the linearised predictive (``predictive='glm'``) turns the Gaussian logits
        of more than two classes into probabilities; two classes always take MacKay's
        probit approximation of the expected sigmoid. 'pairwise': the probit
        approximation of every pairwise difference of the logits (Lu, Ie and Sha,
        2020), which depends on the logits' differences only. 'probit': each logit
        divided by ``sqrt(1 + pi v_k / 8)`` with its own variance ``v_k``, then the
        softmax; it can change the predicted class. 'mc': the average softmax of
        ``predict_samples`` draws of the logits, the linearised predictive itself up
        to Monte Carlo error. On small networks 'mc' and 'probit' are better
        calibrated on clean data and 'pairwise' is more cautious under covariate shift
        (docs/defaults_protocol.md). Ignored by the sampled predictive. Can be changed with
        ``set_params`` after fitting.""",
    ),
}


def _early_stopping_auto(evidence: str) -> Entry:
    """The ``early_stopping`` entry of an estimator whose default is 'auto' (by network size):
    the shared text, what 'auto' stands for, and ``evidence`` (the protocol's finding)."""
    text = f"""
    'auto' is the value the defaults protocol chose: {{auto_early_stopping}} It applies
    where ``max_iter`` is 'auto' or more than ``n_iter_no_change`` (a shorter budget
    cannot be cut short, and trains on every row). {evidence}"""
    return Entry("bool or 'auto'", PARAMS["early_stopping"].text + "\n" + textwrap.dedent(text).strip("\n"))


#: ``early_stopping`` of the classifiers whose default is 'auto' (by network size).
EARLY_STOPPING_AUTO = _early_stopping_auto(
    """Trained to convergence, a large
    network overfits data of a few thousand rows (an image subset: log-loss 0.61-0.86
    without early stopping, 0.50-0.51 with it, fits 1.3-7 times faster;
    docs/defaults_protocol.md)."""
)

#: ``early_stopping`` of the regressors whose default is 'auto' (by network size).
EARLY_STOPPING_AUTO_REGRESSOR = _early_stopping_auto(
    """By the training objective's
    convergence test a wide network fits regression sets of a few thousand rows worse
    (256-256 networks on four sets of 1,000-5,000 rows: a higher test log-likelihood
    with early stopping on all four; docs/defaults_protocol.md)."""
)

#: Attributes of the classification face.
CLASSIFIER_ATTRS: dict[str, Entry] = {
    "classes_": E(
        "ndarray of shape (n_classes,)",
        """
        Class labels.""",
    ),
}


def _format(name: str, entry: Entry, default: Any = inspect.Parameter.empty) -> str:
    head = f"{name} : {entry.type}"
    if default is not inspect.Parameter.empty:
        head += f", default={default!r}"
    return head + "\n" + textwrap.indent(entry.text, "    ")


def _auto_by_size_text(cls: type[Any], name: str) -> str:
    """What ``'auto'`` stands for in parameter ``name`` of ``cls`` (its ``_auto_by_size``)."""
    from ._memory import LARGE_NETWORK_WEIGHTS

    small, large = cls._auto_by_size[name]
    if small == large:
        return f"{small!r} on every network."
    return f"{small!r} on networks of fewer than {LARGE_NETWORK_WEIGHTS:,} weights, {large!r} on larger ones."


def parameters_section(cls: type[Any]) -> str:
    """The Parameters entries of ``cls``, in signature order, defaults from the signature."""
    family = getattr(cls, "_family", None)
    sources = [getattr(cls, "_param_docs", {}), getattr(family, "param_docs", {}), PARAMS]
    out = []
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if name == "self":
            continue
        entry = next((s[name] for s in sources if name in s), None)
        if entry is None:
            raise KeyError(f"no docstring entry for parameter {name!r} of {cls.__name__}")
        if "{auto}" in entry.text:  # the class's 'auto' minibatch size
            entry = Entry(entry.type, entry.text.replace("{auto}", str(cls._auto_batch_size)))
        key = "{auto_" + name + "}"
        if key in entry.text:  # the class's 'auto' value by network size
            entry = Entry(entry.type, entry.text.replace(key, _auto_by_size_text(cls, name)))
        out.append(_format(name, entry, p.default))
    return "\n".join(out)


def attributes_section(cls: type[Any], face_attrs: dict[str, Entry], first: tuple[str, ...] = ()) -> str:
    """The Attributes entries: ``first`` face attributes, the shared ones (with the family's
    overrides) and the remaining face attributes."""
    family = getattr(cls, "_family", None)
    fam = getattr(family, "attr_docs", {})
    out = [_format(n, face_attrs[n]) for n in first]
    tempered = "kl_weight" in inspect.signature(cls.__init__).parameters
    out += [_format(n, fam.get(n, e)) for n, e in ATTRS.items() if tempered or not n.startswith("kl_weight_")]
    out += [_format(n, e) for n, e in face_attrs.items() if n not in first]
    return "\n".join(out)


#: The regressors' sentence on targets and noise, for the ``{face}`` field of a method's body.
REGRESSOR_FACE = """Targets are standardised internally; predictions are mapped back. The
Gaussian noise precision is learned by default (``noise_precision='auto'``) with the
vague Gamma prior ``noise_prior`` and a Gamma variational posterior."""

#: The classifiers' sentence on the likelihood, for the ``{face}`` field of a method's body.
CLASSIFIER_FACE = "Two classes use one logit and a Bernoulli likelihood; more classes use a softmax."

_REGRESSOR_EXAMPLES = """
    >>> from sklearn.datasets import load_diabetes
    >>> from skbayes import {name}
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = {name}(hidden_layer_sizes={hidden}, max_iter=20, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    """

_CLASSIFIER_EXAMPLES = """
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skbayes import {name}
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = {name}(hidden_layer_sizes={hidden}, max_iter=20, random_state=0).fit(X, y)
    >>> proba = clf.predict_proba(X[:3])
    """


def estimator_doc(
    cls: type[Any],
    *,
    summary: str,
    body: str,
    see_also: str,
    example_hidden: str = "(20,)",
) -> str:
    """The whole numpydoc docstring of a public network estimator.

    ``body`` is the extended summary (the method), ``see_also`` lines
    ``name : description``; both dedented. The Examples are the standard ones: a fit of
    ``cls`` with ``hidden_layer_sizes=example_hidden`` on diabetes (a regressor) or on
    the standardised breast cancer data (a classifier), and a prediction.
    """
    from sklearn.base import ClassifierMixin

    template = _CLASSIFIER_EXAMPLES if issubclass(cls, ClassifierMixin) else _REGRESSOR_EXAMPLES
    examples = template.format(name=cls.__name__, hidden=example_hidden)
    if issubclass(cls, ClassifierMixin):
        attrs = attributes_section(cls, CLASSIFIER_ATTRS, first=("classes_",))
    else:
        attrs = attributes_section(cls, REGRESSOR_ATTRS)
    doc = "\n\n".join(
        [
            summary.strip(),
            textwrap.dedent(body).strip("\n"),
            "Parameters\n----------\n" + parameters_section(cls),
            "Attributes\n----------\n" + attrs,
            "See Also\n--------\n" + textwrap.dedent(see_also).strip("\n"),
            "Examples\n--------\n" + textwrap.dedent(examples).strip("\n"),
        ]
    )
    return textwrap.indent(doc, "    ").lstrip() + "\n    "
