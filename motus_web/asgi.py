"""ASGI entry point, laid out like channels' sample project.

The Django application is built first so that the app registry is ready before
the channels imports below touch models (``AuthMiddlewareStack`` does).
HTTP requests pass ``RequestBodyLimit`` first, which refuses a body over
``MOTUS_REQUEST_MAX_BYTES`` before the server reads it (with uvicorn, which
streams bodies; see ``body_limit.py``). On the in-memory channel layer a
second web process on this machine refuses to start (``layer_guard.py``);
``MOTUS_IN_MEMORY_LAYER_LOCK=off`` turns that off (the tests do, to run in
parallel). Websockets pass the same-origin check first (``chat/origins.py``:
scheme, host and port, as Django's CSRF check).
"""

import os
from pathlib import Path

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "motus_web.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from motus_web import layer_guard  # noqa: E402
from motus_web.body_limit import RequestBodyLimit  # noqa: E402
from motus_web.chat.origins import SameOriginValidator  # noqa: E402
from motus_web.chat.routing import websocket_urlpatterns  # noqa: E402
from motus_web.env import env_str  # noqa: E402

if settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels.layers.InMemoryChannelLayer":
    _lock = env_str("MOTUS_IN_MEMORY_LAYER_LOCK", str(settings.VAR_DIR / "in-memory-layer.lock"))
    if _lock != "off":
        layer_guard.claim(Path(_lock))

application = ProtocolTypeRouter(
    {
        "http": RequestBodyLimit(django_asgi_app, max_bytes=settings.MOTUS_REQUEST_MAX_BYTES),
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
