"""What every test shares."""

from __future__ import annotations

import os

# Test processes run side by side (pytest -n), each with its own in-memory channel
# layer: the one-web-process guard of motus_web/asgi.py is for servers.
os.environ["MOTUS_IN_MEMORY_LAYER_LOCK"] = "off"
