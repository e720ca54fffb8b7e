"""Model-provider clients."""

from .base import ChatClient, Completion, Usage

__all__ = ["ChatClient", "Completion", "Usage"]
