"""Per-model correction of the token estimate, learned from provider-reported usage.

The library counts tokens with tiktoken; for a model without a public
tokenizer (Claude, Gemini) or with a chat template of its own (Llama, Qwen
behind vLLM), the count is off by a steady factor. Every completion reports
what the provider really counted (``Completion.usage.input_tokens``), so the
ratio of that to the library's estimate of the same request can be learned
and applied before the threshold check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError

# Requests smaller than this are mostly per-message overhead, which the
# provider's template and ours count differently: their ratio says little.
MIN_TOKENS = 200
# A ratio outside [1/4, 4] is not a tokenizer difference but a mismatch (the
# estimate did not cover the request sent, e.g. the tool schemas were left
# out): learning from it would skew every later check.
MAX_PLAUSIBLE_RATIO = 4.0


@dataclass(frozen=True, slots=True)
class ModelCalibration:
    """What was learned for one model: the factor and how many requests taught it."""

    factor: float = 1.0
    samples: int = 0


class TokenCalibration:
    """Learns, per model, ``reported / estimated`` input tokens.

    After each model call, ``observe(model, estimated, reported)`` with the
    library's estimate of the request as sent (messages and tool schemas,
    counted as the threshold check counts them) and the provider's
    ``usage.input_tokens``. ``factor(model)`` is then an exponential moving
    average of the ratios (``alpha``: the weight of the newest; the first
    observation is taken whole), clamped to ``[min_factor, max_factor]``;
    1.0 for a model not seen yet. ``adjust(model, estimated)`` is the
    estimate corrected, rounded up, for the threshold check.

    Observations are skipped (``observe`` returns ``False``) when nothing
    was reported, the estimate is below ``MIN_TOKENS``, or the ratio is
    implausible (see ``MAX_PLAUSIBLE_RATIO``).

    Raises ``ConfigurationError`` for ``alpha`` outside (0, 1] or bounds that
    do not contain 1.
    """

    def __init__(
        self, *, alpha: float = 0.3, min_factor: float = 0.5, max_factor: float = 2.0
    ) -> None:
        if not 0 < alpha <= 1:
            raise ConfigurationError(f"alpha must be in (0, 1], got {alpha!r}")
        if not 0 < min_factor <= 1 <= max_factor:
            raise ConfigurationError(
                f"need 0 < min_factor <= 1 <= max_factor, got {min_factor!r}, {max_factor!r}"
            )
        self.alpha = alpha
        self.min_factor = min_factor
        self.max_factor = max_factor
        self._models: dict[str, ModelCalibration] = {}

    def observe(self, model: str, estimated: int, reported: int | None) -> bool:
        """Learn from one request; ``True`` if it was used."""
        if reported is None or estimated < MIN_TOKENS or reported <= 0:
            return False
        ratio = reported / estimated
        if not 1 / MAX_PLAUSIBLE_RATIO <= ratio <= MAX_PLAUSIBLE_RATIO:
            return False
        seen = self._models.get(model)
        if seen is None or seen.samples == 0:
            factor = ratio
            samples = 1
        else:
            factor = (1 - self.alpha) * seen.factor + self.alpha * ratio
            samples = seen.samples + 1
        factor = min(max(factor, self.min_factor), self.max_factor)
        self._models[model] = ModelCalibration(factor=factor, samples=samples)
        return True

    def get(self, model: str) -> ModelCalibration:
        """What was learned for ``model`` (factor 1.0, 0 samples if nothing)."""
        return self._models.get(model, ModelCalibration())

    def factor(self, model: str) -> float:
        """The correction factor of ``model`` (1.0 until it is observed)."""
        return self.get(model).factor

    def adjust(self, model: str, estimated: int) -> int:
        """``estimated`` corrected for ``model``: ``ceil(estimated * factor)``."""
        return math.ceil(estimated * self.factor(model) - 1e-9)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready snapshot (``{"models": {name: {"factor", "samples"}}}``)."""
        return {
            "models": {
                name: {"factor": m.factor, "samples": m.samples} for name, m in self._models.items()
            }
        }

    def load(self, data: Mapping[str, Any]) -> None:
        """Restore a ``to_dict`` snapshot (entries that do not parse are skipped)."""
        for name, entry in (data.get("models") or {}).items():
            try:
                factor = float(entry["factor"])
                samples = int(entry["samples"])
            except (KeyError, TypeError, ValueError):
                continue
            if math.isfinite(factor) and samples > 0:
                factor = min(max(factor, self.min_factor), self.max_factor)
                self._models[str(name)] = ModelCalibration(factor=factor, samples=samples)
