from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.humanize.templatetags.humanize import intcomma

from memory import OFFLINE_SUMMARISER as OFFLINE
from memory import CompactionMemoryConfig, ConfigurationError
from motus_web.providers import ChatModel
from motus_web.sessions.limits import REPLAY_THRESHOLD_MAX, REPLAY_THRESHOLD_MIN
from motus_web.sessions.long_term_store import owner_scope

from .tools import Overhead, overhead


def _model_choices() -> list[tuple[str, str]]:
    return [(m.name, m.label) for m in settings.MOTUS_CHAT_MODELS]


class NewChatForm(forms.Form):
    title = forms.CharField(max_length=200, required=False)
    model = forms.ChoiceField(choices=())
    system_prompt = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        initial="You are a helpful assistant. Use the calculator for arithmetic.",
    )
    token_threshold = forms.IntegerField(
        required=False,
        min_value=REPLAY_THRESHOLD_MIN,
        max_value=REPLAY_THRESHOLD_MAX,
        label="Token threshold",
        help_text="Compact above this many context tokens; empty: 75% of the model's window.",
    )

    remember = forms.BooleanField(
        required=False,
        label="Remember across chats",
        help_text="Background memory: what you say is remembered, and recalled in your "
        "other chats with the same memory name.",
    )
    memory_name = forms.CharField(
        max_length=64,
        required=False,
        label="Memory name",
        help_text="Empty: your one shared memory. Letters, digits and _.@:- only.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = _model_choices()  # type: ignore[attr-defined]

    def clean_memory_name(self) -> str:
        name: str = self.cleaned_data.get("memory_name", "").strip()
        try:
            owner_scope(0, name)
        except ConfigurationError:
            raise forms.ValidationError(
                f"{name!r} cannot name a memory: use letters, digits and _ . @ : - only "
                "(no spaces), at most 64 characters."
            ) from None
        return name

    def clean(self) -> dict[str, Any]:
        """Refuse a threshold the fixed part of every request already reaches: the
        system prompt and the tool schemas cannot be compacted, so every turn
        would end "still over the threshold"."""
        data = super().clean() or {}
        threshold, floor = data.get("token_threshold"), self.overhead()
        if threshold is None or floor is None:
            return data
        if threshold <= floor.context_tokens:
            self.add_error(
                "token_threshold",
                f"At least {intcomma(floor.context_tokens + 1)} tokens: the system prompt and "
                f"the schemas of the agent's {len(floor.tool_names)} tools alone take "
                f"{intcomma(floor.context_tokens)} tokens of every request "
                f"({intcomma(floor.tool_tokens)} of them tool schemas), and compaction cannot "
                "make them smaller.",
            )
        return data

    def overhead(self) -> Overhead | None:
        """What every request of the chat these fields describe carries before any
        message; ``None`` until a model and a prompt are known (an unbound form:
        the first model and the initial prompt)."""
        if not self.is_bound:
            choices = _model_choices()
            name = choices[0][0] if choices else None
            prompt, remember = self.fields["system_prompt"].initial, False
        else:
            data = getattr(self, "cleaned_data", {})
            name, prompt = data.get("model"), data.get("system_prompt")
            remember = bool(data.get("remember"))
        if name is None or prompt is None:
            return None
        model = chat_model(name)
        config = memory_config(None, model)
        return overhead(config, model.model, prompt, remember=remember)

    def threshold_advice(self) -> ThresholdAdvice | None:
        """What the page says about the threshold before the chat is created."""
        floor = self.overhead()
        if floor is None:
            return None
        threshold = getattr(self, "cleaned_data", {}).get("token_threshold")
        return ThresholdAdvice(floor, threshold)


@dataclass(frozen=True, slots=True)
class ThresholdAdvice:
    """The fixed parts of a new chat's requests and the threshold chosen
    (``None``: the model's window times the safety ratio)."""

    overhead: Overhead
    threshold: int | None

    @property
    def room(self) -> int | None:
        """Tokens the threshold leaves above the fixed parts (negative: none)."""
        return None if self.threshold is None else self.threshold - self.overhead.fixed_tokens

    @property
    def too_small(self) -> bool:
        """The threshold leaves less than ``CONVERSATION_ROOM_TOKENS`` above the fixed parts."""
        return self.threshold is not None and self.threshold < self.overhead.suggested_threshold


def chat_model(name: str) -> ChatModel:
    """The configured chat model named ``name`` (a valid choice of the form)."""
    return next(m for m in settings.MOTUS_CHAT_MODELS if m.name == name)


def memory_config(threshold: int | None, model: ChatModel) -> CompactionMemoryConfig:
    """The memory settings of a new chat with ``model``."""
    return CompactionMemoryConfig(
        token_threshold=threshold, compact_model_name=model.compact_model or model.model
    )


class ReplayForm(forms.Form):
    token_threshold = forms.IntegerField(
        required=False,
        min_value=REPLAY_THRESHOLD_MIN,
        max_value=REPLAY_THRESHOLD_MAX,
        initial=settings.MOTUS_REPLAY_THRESHOLD,
        label="Token threshold",
        help_text="Compact above this many context tokens; empty: the window times the ratio.",
    )
    safety_ratio = forms.FloatField(
        min_value=0.05, max_value=1.0, initial=0.75, help_text="Used when no threshold is given."
    )
    model_name = forms.CharField(
        max_length=100,
        label="Model (its window and tokenizer)",
        help_text="For example gpt-4o or claude-sonnet-4.",
    )
    max_tool_result_tokens = forms.IntegerField(
        min_value=0, max_value=1_000_000, initial=50_000, help_text="0: no limit."
    )

    compactor = forms.ChoiceField(
        choices=(),
        label="Summaries written by",
        help_text="The offline summariser needs no model; a configured model summarises for real.",
    )
    clear_tool_results = forms.BooleanField(
        required=False,
        label="Clear old tool results first",
        help_text="At the threshold, tool results older than the newest few become one-line stubs "
        "(the log keeps them whole); a summary is written only if that is not enough.",
    )
    clear_keep_tool_results = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=1_000,
        initial=3,
        label="Tool results kept whole",
        help_text="The newest tool results a clearing leaves as they are.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        offline = [(OFFLINE, "the offline summariser")]
        self.fields["compactor"].choices = offline + _model_choices()  # type: ignore[attr-defined]
