"""The one tolerance rule: the band of a number as the paper prints it, and whether ours meets it."""

from __future__ import annotations

import math
import re

from ..stats import NOT_APPLICABLE, as_estimate, zero_band

# The papers' own spread between their models: Lines of Thought gives lambda ~ 0.18 per layer for GPT-2 medium
# and ~ 0.27 for Llama 2 7B, the one number either paper reports for two models.
CROSS_MODEL_FACTOR = 0.27 / 0.18
TOLERANCE_RULE = (
    "A number of the papers agrees with ours when our 95% interval meets its band, and differs when the "
    "interval lies wholly outside it. The band is the number as printed, widened by half a unit of its last "
    "printed digit (a range printed as a-b keeps both ends, each widened the same way). A rate or scale of a "
    "model (lambda, alpha, a divergence in nats) is widened further by the factor that separates the papers' "
    "own models for the same kind of number: lambda is 0.18 for GPT-2 medium and 0.27 for Llama 2 7B, a factor "
    f"of {CROSS_MODEL_FACTOR:.2f}, so the band runs from its low end divided by {CROSS_MODEL_FACTOR:.2f} to its "
    "high end times it. A share or an accuracy keeps the printed precision. A value the paper draws as about "
    "zero, with no digits, has the band from 0 to the same statistic's sampling floor: the upper end of its "
    "values on Gaussian samples of the same size (from their lower end, where that is below 0: a signed "
    "statistic such as an excess kurtosis). No band is set from our results; a value without a finite interval is "
    "inconclusive unless it is a deterministic property of the weights."
)


# ----------------------------------------------------------------------------------------------
# the tolerance rule

_PRINTED = re.compile(
    r"^\s*~?\s*(\d+(?:\.\d+)?)\s*(?:[-–]\s*(\d+(?:\.\d+)?))?\s*(%?)\s*$"
)


def _widened(number: str, percent: bool) -> tuple[float, float]:
    """A printed number and half a unit of its last digit, as a fraction when printed as a percentage."""
    digits = len(number.split(".")[1]) if "." in number else 0
    half, value = 0.5 * 10.0**-digits, float(number)
    scale = 0.01 if percent else 1.0
    return (value - half) * scale, (value + half) * scale


def band(
    printed: str, scale: str, floor: tuple[float, float] | None = None
) -> tuple[float, float]:
    """The band of values that agree with a paper number printed as `printed` ("0.18", "50-51%", "1-1.5",
    "~0"), under `TOLERANCE_RULE`: the printed precision, widened by `CROSS_MODEL_FACTOR` for a `rate`;
    "~0" is `stats.zero_band` of `floor`, the range (low, high) of the statistic on Gaussian samples
    of the same size."""
    if printed.replace(" ", "") in ("~0", "0"):
        if floor is None or not all(math.isfinite(x) for x in floor):
            raise ValueError(
                f"a paper value printed as {printed!r} needs as_paper.floor (a sampling floor)"
            )
        return zero_band(*floor)
    match = _PRINTED.match(printed)
    if not match:
        raise ValueError(
            f"as_paper.printed {printed!r} is not a number, a range a-b or ~0 (a % sign may follow)"
        )
    first, second, percent = match.groups()
    lo = _widened(first, bool(percent))[0]
    hi = _widened(second or first, bool(percent))[1]
    if scale == "rate":
        return lo / CROSS_MODEL_FACTOR, hi * CROSS_MODEL_FACTOR
    return lo, hi


def against_paper(
    claim: dict, values: dict, reading: str = "key"
) -> tuple[str, object, tuple[float, float] | None]:
    """Question 1 for `claim` from a chapter's recorded `values`: the verdict word (`AGAINST_PAPER`), the value
    by the paper's statistic and protocol, and the band it is judged against (None without a paper number).
    `reading="second_reading"`: the same for the value of `as_paper.second_reading` (another reading of a
    protocol the paper leaves open, judged by the same band)."""
    if claim["nature"] == "identity":
        # an identity checks our code, not a number of the paper
        return "not applicable", None, None
    if claim["origin"] != "paper":
        return "extension", None, None
    spec = claim.get("as_paper")
    if spec is None:
        return "qualitative", None, None
    value = values.get(spec["key"] if reading == "key" else spec[reading]["key"])
    if is_not_applicable(value):
        return "not applicable", value, None
    floor = _floor_range(values.get(spec.get("floor"))) if spec.get("floor") else None
    try:
        low, high = band(spec["printed"], spec["scale"], floor)
    except ValueError:
        return "missing", value, None  # the floor was not recorded
    found = interval_of(value, claim.get("deterministic", False))
    if found in ("missing", "not applicable"):
        return found, value, (low, high)
    if found == "no interval":
        return "inconclusive", value, (low, high)
    return ("agrees" if meets(found, (low, high)) else "differs"), value, (low, high)


def meets(interval: tuple[float, float], band_: tuple[float, float]) -> bool:
    """Whether an interval (lo, hi) of ours meets a paper number's band (low, high): `TOLERANCE_RULE`'s test."""
    (lo, hi), (low, high) = interval, band_
    return not (hi < low or lo > high)


def _floor_range(value) -> tuple[float, float] | None:
    """A recorded sampling floor as (low, high): its interval, or its value twice when it has none."""
    estimate = as_estimate(value)
    if estimate is None:
        return None
    if math.isfinite(estimate.lo) and math.isfinite(estimate.hi):
        return estimate.lo, estimate.hi
    return estimate.value, estimate.value


# ----------------------------------------------------------------------------------------------
# judging one value


def allowed(
    test: dict, paper_value, band_: tuple[float, float] | None = None
) -> tuple[float, float]:
    """The interval of values that pass `test` (kinds abs, rel, max, min, range; paper: `band_`)."""
    kind = test["kind"]
    if kind == "abs":
        return paper_value - test["tol"], paper_value + test["tol"]
    if kind == "rel":
        return paper_value - test["tol"] * abs(paper_value), paper_value + test[
            "tol"
        ] * abs(paper_value)
    if kind == "max":
        return -math.inf, test["bound"]
    if kind == "min":
        return test["bound"], math.inf
    if kind == "range":
        return test["lo"], test["hi"]
    if kind == "paper" and band_ is not None:
        return band_
    raise ValueError(f"no interval for a test of kind {kind!r}")


def is_not_applicable(value) -> bool:
    return isinstance(value, dict) and NOT_APPLICABLE in value


def interval_of(value, deterministic: bool):
    """(lo, hi) of a recorded value; 'missing', 'not applicable' or 'no interval' when it has none to judge
    (a point value counts as [v, v] only when `deterministic`)."""
    if is_not_applicable(value):
        return "not applicable"
    if value is None:
        return "missing"
    estimate = as_estimate(value) if not isinstance(value, bool) else None
    if estimate is None or not math.isfinite(estimate.value):
        return "missing"
    # `stats.exact`: a point value, no sampling behind it
    sampled = estimate.method != "exact"
    if sampled and math.isfinite(estimate.lo) and math.isfinite(estimate.hi):
        return estimate.lo, estimate.hi
    return (estimate.value, estimate.value) if deterministic else "no interval"
