"""What the pages show of a model record: plain rows and links for the templates (no HTML here;
the templates escape every value)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

from service.model_types import ModelSpec

METRICS = ("accuracy", "precision", "recall", "f1", "roc_auc")
INLINE_TRACES = 12
"""Trace plots drawn inline on a model's page; every other coefficient's is a link."""
PLOTS = (
    ("roc", "ROC curves of the cross-validation folds"),
    ("boundary", "Decision regions on the first two features"),
    ("path", "Posterior mode over ν (the regularisation path)"),
    ("compare", "Bayesian against linear-SVM coefficients"),
)


def number(value: Any) -> str:
    """A metric or parameter as a person reads it: 4 significant digits, '–' for none."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def when(value: str | None) -> str:
    """An ISO 8601 UTC time as ``2026-01-31 12:00:00`` (the pages say UTC once)."""
    return value[:19].replace("T", " ") if value else "–"


def metric(value: Any) -> str:
    """A metric between 0 and 1 with three decimals, '–' for none."""
    return "–" if value is None else f"{value:.3f}"


def shown(value: Any) -> str:
    """A parameter's value: numbers as ``number``, anything else as compact JSON."""
    if value is None or isinstance(value, bool | int | float):
        return number(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(", ", ": "), default=str)


def model_url(model_id: str, tail: str = "", query: dict[str, Any] | None = None) -> str:
    """A page or plot of one model under ``/ui``."""
    url = f"/ui/models/{quote(model_id, safe='')}{tail}"
    return f"{url}?{urlencode(query)}" if query else url


def headline(record: dict[str, Any]) -> tuple[str, str]:
    """The one metric a list shows: CV mean accuracy, else held-out, else training accuracy."""
    metrics = record.get("metrics") or {}
    if metrics.get("cv"):
        return "cv accuracy", metric(metrics["cv"]["mean"].get("accuracy"))
    if metrics.get("heldout"):
        return "held-out accuracy", metric(metrics["heldout"].get("accuracy"))
    return "train accuracy", metric((metrics.get("train") or {}).get("accuracy"))


def version_row(record: dict[str, Any]) -> dict[str, Any]:
    """One version in a name's list."""
    label, value = headline(record)
    return {
        "version": record["version"],
        "model_id": record["model_id"],
        "url": model_url(record["model_id"]),
        "created_at": record["created_at"],
        "aliases": record.get("aliases") or [],
        "tags": sorted((record.get("tags") or {}).items()),
        "description": record.get("description") or "",
        "metric": f"{value} ({label})",
    }


def metric_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Training, held-out and CV metrics as rows of one table."""
    rows = [{"set": "training rows", "n": metrics["train"]["n_samples"], **metrics["train"]}]
    heldout = metrics.get("heldout")
    if heldout:
        share = f"held out ({heldout['test_fraction']:.0%})"
        rows.append({"set": share, "n": heldout["n_samples"], **heldout})
    cv = metrics.get("cv")
    if cv:
        mean, sd = cv["mean"], cv["sd"]
        cells = {
            m: f"{metric(mean.get(m))} ± {metric(sd.get(m))}" if mean.get(m) is not None else "–"
            for m in METRICS
        }
        rows.append({"set": f"{cv['k']}-fold CV (mean ± sd)", "n": None, **cells})
    return [
        {
            "set": r["set"],
            "n": r["n"],
            "cells": [c if isinstance(c, str) else metric(c) for c in (r.get(m) for m in METRICS)],
        }
        for r in rows
    ]


def has_plot_data(record: dict[str, Any], key: str) -> bool:
    """True when training stored usable data for the plot ``key``."""
    value = (record.get("plot_data") or {}).get(key)
    return value is not None and not (isinstance(value, dict) and "error" in value)


def plots(record: dict[str, Any]) -> list[dict[str, str]]:
    """The plots this model can draw, with their URLs under ``/ui``."""
    can = {
        "roc": has_plot_data(record, "roc"),
        "boundary": int(record["n_features"]) >= 2 and record.get("feature_means") is not None,
        "path": has_plot_data(record, "path"),
        "compare": has_plot_data(record, "compare"),
    }
    return [
        {"title": title, "url": model_url(record["model_id"], f"/{kind}.png")}
        for kind, title in PLOTS
        if can[kind]
    ]


def posterior_rows(
    record: dict[str, Any], posterior: dict[str, Any], spec: ModelSpec
) -> list[dict[str, Any]]:
    """The posterior table; a model with draws links each coefficient's trace plot."""
    rows = []
    for entry in posterior["coefficients"]:
        row = {key: entry.get(key) for key in ("name", "mean", "mode", "sd", "lower", "upper")}
        versus = entry.get("versus")
        row.update(
            cls=entry.get("class") if versus is None else f"{entry['class']} vs {versus}",
            ess=entry.get("ess"),
            rhat=entry.get("rhat"),
            inclusion=entry.get("inclusion_prob"),
            trace=None,
        )
        if spec.posterior == "draws":
            query = {"coef": entry["name"]}
            if entry.get("class") is not None:
                query["class"] = str(entry["class"])
            if versus is not None:
                query["versus"] = str(versus)
            row["trace"] = model_url(record["model_id"], "/trace.png", query)
        rows.append(row)
    return rows


def model_page(
    record: dict[str, Any], spec: ModelSpec | None, posterior: dict[str, Any] | None
) -> dict[str, Any]:
    """Everything the model page shows."""
    training = record.get("training") or {}
    signature = record.get("signature") or {}
    inputs = [i["name"] for i in signature.get("inputs", [])] or record.get("feature_names") or []
    rows = posterior_rows(record, posterior, spec) if posterior and spec else []
    search = record.get("search")
    return {
        "record": record,
        "params": [(key, shown(value)) for key, value in sorted(record["params"].items())],
        "seed_in_params": "random_state" in record["params"],
        "tags": sorted((record.get("tags") or {}).items()),
        "inputs": inputs,
        "classes": [str(c) for c in record.get("classes") or []],
        "training": training,
        "warnings": training.get("warnings") or [],
        "metric_names": METRICS,
        "metric_rows": metric_rows(record["metrics"]),
        "cv": (record["metrics"] or {}).get("cv"),
        "search": search,
        "search_rows": [
            {"params": shown(c["params"]), "mean": c.get("mean"), "sd": c.get("sd")}
            for c in (search or {}).get("results", [])
        ],
        "plots": plots(record),
        "posterior": posterior,
        "posterior_rows": rows,
        "mode_only": spec is not None and spec.posterior == "mode",
        "traces": [r for r in rows if r["trace"]][:INLINE_TRACES],
        "libraries": sorted((record.get("library_versions") or {}).items()),
    }
