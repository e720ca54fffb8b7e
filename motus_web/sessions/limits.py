"""Bounds shared by the import command and the Import page."""

from django.contrib.humanize.templatetags.humanize import intcomma
from django.core.exceptions import ValidationError

# The bounds of a replay's token threshold.
REPLAY_THRESHOLD_MIN = 100
REPLAY_THRESHOLD_MAX = 10_000_000


def validate_replay_threshold(value: int) -> None:
    if not REPLAY_THRESHOLD_MIN <= value <= REPLAY_THRESHOLD_MAX:
        raise ValidationError(
            f"The token threshold must be between {intcomma(REPLAY_THRESHOLD_MIN)} and "
            f"{intcomma(REPLAY_THRESHOLD_MAX)} tokens, not {intcomma(value)}: under "
            f"{REPLAY_THRESHOLD_MIN} a replay would compact at every message, and no "
            f"model's context window reaches {intcomma(REPLAY_THRESHOLD_MAX)}.",
            code="threshold",
        )
