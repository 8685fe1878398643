"""Example bodies of the OpenAPI document, so that Swagger UI's "Try it out" works at once.

``/train`` has one example per model type, all on the same twelve iris rows (two features, two
classes); the kernel SVM's is the default and trains ``iris-demo``, the model the ``/predict``
examples score (``iris-mcmc`` for credible intervals). A model type without an entry in
``EXAMPLE_PARAMS`` still gets an example, on its default params.
"""

from __future__ import annotations

from typing import Any

from service.model_types import ModelTypes

FEATURES = ["sepal_length", "sepal_width"]
IRIS_X = [
    [5.1, 3.5], [4.9, 3.0], [4.7, 3.2], [4.6, 3.1], [5.0, 3.6], [5.4, 3.9],
    [6.3, 3.3], [5.8, 2.7], [7.1, 3.0], [6.3, 2.9], [6.5, 3.0], [7.6, 3.0],
]  # fmt: skip
IRIS_Y = ["setosa"] * 6 + ["virginica"] * 6
IRIS_CSV = "sepal_length,sepal_width,species\n" + "".join(
    f"{a},{b},{label}\n" for (a, b), label in zip(IRIS_X, IRIS_Y, strict=True)
)
NEW_ROWS = [[5.0, 3.3], [6.5, 2.8]]
DEFAULT_MODEL = "iris-demo"
TRAIN_CSV_QUERY = {"model_type": "lda", "target": "species", "name": DEFAULT_MODEL}
"""The query that trains ``IRIS_CSV`` (not an OpenAPI example: Swagger UI would send it with the
JSON example too, where a query parameter is a 422)."""

#: model type -> (model name, summary, params); the kernel SVM first: Swagger UI's default.
EXAMPLE_PARAMS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "kernel_svm": (
        DEFAULT_MODEL,
        "Kernel SVM (RBF), with probabilities",
        {"C": 1.0, "kernel": "rbf", "gamma": "scale", "probability": True, "random_state": 0},
    ),
    "linear_svm": ("iris-linear", "Linear SVM", {"C": 1.0}),
    "lda": ("iris-lda", "Linear discriminant analysis", {}),
    "qda": ("iris-qda", "Quadratic discriminant analysis", {"reg_param": 0.1}),
    "em_svm": ("iris-em", "Bayesian SVM, posterior mode by EM", {"alpha": 2.0, "nu": 1.0}),
    "ecme_svm": ("iris-ecme", "Bayesian SVM, mode by ECME (learns nu)", {"alpha": 2.0}),
    "mcmc_svm": (
        "iris-mcmc",
        "Bayesian SVM by Gibbs sampling (intervals)",
        {"alpha": 2.0, "nu": 1.0, "n_draws": 500, "burn_in": 200, "n_chains": 2, "random_state": 0},
    ),
    "spike_slab_svm": (
        "iris-spike-slab",
        "Bayesian SVM with spike-and-slab selection",
        {"alpha": 1, "nu": 1.0, "n_draws": 500, "burn_in": 200, "n_chains": 2, "random_state": 0},
    ),
}


def train_examples(types: ModelTypes) -> dict[str, dict[str, Any]]:
    """``openapi_examples`` of ``POST /train``: one per model type of ``types``."""
    order = [t for t in EXAMPLE_PARAMS if t in types] + sorted(set(types) - set(EXAMPLE_PARAMS))
    examples = {}
    for model_type in order:
        name, summary, params = EXAMPLE_PARAMS.get(
            model_type, (f"iris-{model_type.replace('_', '-')}", model_type, {})
        )
        examples[model_type] = {
            "summary": summary,
            "description": f"Train a `{model_type}` named `{name}` on twelve iris rows.",
            "value": {
                "model_type": model_type,
                "name": name,
                "params": params,
                "X": IRIS_X,
                "y": IRIS_Y,
                "feature_names": FEATURES,
            },
        }
    return examples


PREDICT_EXAMPLES: dict[str, dict[str, Any]] = {
    "labels": {
        "summary": "Labels and decision values",
        "description": f"Score two rows with the latest `{DEFAULT_MODEL}` (train it first).",
        "value": {
            "model": DEFAULT_MODEL,
            "X": NEW_ROWS,
            "outputs": ["predictions", "decision_function"],
        },
    },
    "probabilities": {
        "summary": "Probabilities, columns named",
        "description": "Columns are matched by feature_names; extra ones are listed in "
        "dropped_columns.",
        "value": {
            "model": DEFAULT_MODEL,
            "X": [[3.3, 5.0, 0], [2.8, 6.5, 1]],
            "feature_names": ["sepal_width", "sepal_length", "row_id"],
            "outputs": ["predictions", "probabilities"],
        },
    },
    "intervals": {
        "summary": "Credible intervals (Bayesian, sampled)",
        "description": "Needs `iris-mcmc` (the mcmc_svm example of POST /train).",
        "value": {
            "model": "iris-mcmc",
            "X": NEW_ROWS,
            "outputs": ["predictions", "intervals"],
            "level": 0.9,
        },
    },
}

PREDICT_CSV = "sepal_length,sepal_width\n" + "".join(f"{a},{b}\n" for a, b in NEW_ROWS)
