"""Corruption error (CE) and its mean (mCE), absolute and relative, as Hendrycks & Dietterich (ICLR 2019) define
them against AlexNet on ImageNet-C.

For a model with top-1 error E_{s,c} under corruption c at severity s, and E_clean on the clean images:

    CE_c          = Σ_s E_{s,c} / Σ_s E^AlexNet_{s,c}
    relative CE_c = Σ_s (E_{s,c} − E_clean) / Σ_s (E^AlexNet_{s,c} − E^AlexNet_clean)
    mCE, relative mCE: the means of CE_c and relative CE_c over the 15 corruptions

with s over severities 1-5. AlexNet's errors ship as its mean over those five severities per corruption and its
clean error (`resources/imagenet_c_alexnet.json`, with their sources). Σ_s over five severities is five times the
mean, so a CE is defined for a corruption scored at all five severities, and mCE only when all 15 corruptions are.
Values are fractions: 1.0 is AlexNet's CE (the paper prints it as 100 %). AlexNet's errors are against ImageNet's
original validation labels.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

from evaluator.errors import EvaluationError, unknown_name

SEVERITIES = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class AlexNetBaseline:
    """AlexNet's top-1 errors (fractions): the mean over severities 1-5 per ImageNet-C corruption, and clean."""

    corruption_errors: dict[str, float]  # keyed by ImageNet-C's names, in the paper's order
    clean_error: float


@dataclass(frozen=True)
class CorruptionErrors:
    """CE and relative CE (fractions; AlexNet = 1.0) per corruption that has all five severities, and their means
    over ImageNet-C's 15 when every one has them (else None, and `missing` names those without)."""

    ce: dict[str, float]
    relative_ce: dict[str, float]
    mce: float | None
    relative_mce: float | None
    missing: tuple[str, ...]  # ImageNet-C corruptions with no CE: absent, or not scored at all five severities


@lru_cache(maxsize=1)
def alexnet_baseline() -> AlexNetBaseline:
    """The shipped AlexNet errors (`evaluator/resources/imagenet_c_alexnet.json`)."""
    data = json.loads((resources.files("evaluator") / "resources" / "imagenet_c_alexnet.json").read_text("utf-8"))
    errors = {k: float(v) for k, v in data["corruption_errors"].items() if k != "about"}
    return AlexNetBaseline(corruption_errors=errors, clean_error=float(data["clean_error"]["value"]))


def corruption_errors(
    errors: Mapping[str, Mapping[int, float]], clean_error: float, baseline: AlexNetBaseline | None = None
) -> CorruptionErrors:
    """CE, relative CE, mCE and relative mCE (module docstring) of a model.

    `errors`: ImageNet-C corruption name (`jpeg_compression`, not `jpeg`) → {severity: top-1 error}, errors as
    fractions in [0, 1] (NaN: not scored); `clean_error` likewise. A corruption missing a severity of 1-5 gets no
    CE. `baseline` defaults to AlexNet's shipped errors.
    """
    baseline = baseline or alexnet_baseline()
    for name, by_severity in errors.items():
        if name not in baseline.corruption_errors:
            raise unknown_name("ImageNet-C corruption", name, baseline.corruption_errors)
        for severity, value in by_severity.items():
            if severity not in SEVERITIES:
                raise EvaluationError(f"{name}: severity must be one of 1, 2, 3, 4, 5, got {severity!r}")
            _check_error(f"{name} at severity {severity}", value)
    _check_error("clean_error", clean_error)
    return _compute_corruption_errors(errors, clean_error, baseline)


def _check_error(what: str, value: object) -> None:
    if not isinstance(value, int | float | np.floating) or not (math.isnan(value) or 0 <= value <= 1):
        raise EvaluationError(f"{what}: a top-1 error must be a fraction in [0, 1] (or NaN), got {value!r}")


def _compute_corruption_errors(
    errors: Mapping[str, Mapping[int, float]], clean_error: float, baseline: AlexNetBaseline
) -> CorruptionErrors:
    ce: dict[str, float] = {}
    relative: dict[str, float] = {}
    for name, alexnet in baseline.corruption_errors.items():
        by_severity = errors.get(name, {})
        if set(by_severity) != set(SEVERITIES):
            continue
        total = float(sum(by_severity[s] for s in SEVERITIES))
        ce[name] = total / (len(SEVERITIES) * alexnet)
        relative[name] = (total - len(SEVERITIES) * clean_error) / (len(SEVERITIES) * (alexnet - baseline.clean_error))
    missing = tuple(name for name in baseline.corruption_errors if name not in ce)
    complete = not missing
    return CorruptionErrors(
        ce=ce,
        relative_ce=relative,
        mce=float(np.mean(list(ce.values()))) if complete else None,
        relative_mce=float(np.mean(list(relative.values()))) if complete else None,
        missing=missing,
    )
