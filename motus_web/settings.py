"""Settings of the Motus dashboard, read from the environment (docs/configuration.md).

With nothing set it runs locally: SQLite in var/, the in-memory channel layer,
DEBUG off, localhost only. ``DATABASE_URL`` and ``REDIS_URL`` select
PostgreSQL and Redis.
"""

from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from motus_web.env import (
    env_bool,
    env_choice,
    env_int,
    env_list,
    env_str,
    env_url,
    local_secret_key,
)
from motus_web.providers import read_chat_models

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

DEBUG = env_bool("DEBUG", default=False)

# ALLOWED_HOSTS unset means the server only answers on this machine, so a key
# generated into var/ is safe; anything published needs SECRET_KEY.
_LOCAL_HOSTS = ["localhost", "127.0.0.1", "[::1]"]
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", default=_LOCAL_HOSTS)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG and ALLOWED_HOSTS != _LOCAL_HOSTS:
        raise ImproperlyConfigured(
            "SECRET_KEY is required when DEBUG is off and ALLOWED_HOSTS is set"
        )
    SECRET_KEY = local_secret_key(VAR_DIR / "secret_key")
elif len(SECRET_KEY) < 32:
    raise ImproperlyConfigured("SECRET_KEY must be at least 32 characters long")

CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", default=[])
SECURE_COOKIES = env_bool("SECURE_COOKIES", default=False)
SESSION_COOKIE_SECURE = SECURE_COOKIES
CSRF_COOKIE_SECURE = SECURE_COOKIES
CSRF_FAILURE_VIEW = "motus_web.dashboard.errors.csrf_failure"  # the product's own 403 page
SECURE_CONTENT_TYPE_NOSNIFF = True
# Production behind HTTPS: redirect plain HTTP, and tell browsers to use HTTPS
# only (HSTS) for SECURE_HSTS_SECONDS. Behind a proxy that ends TLS, set
# SECURE_PROXY_SSL_HEADER=1 so the X-Forwarded-Proto header says the request was HTTPS.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=False)
if env_bool("SECURE_PROXY_SSL_HEADER", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# The dashboard uses none of the browser's powerful features: every answer says so
# (motus_web.dashboard.middleware.PermissionsPolicyMiddleware, and the 413 answer).
PERMISSIONS_POLICY = (
    "accelerometer=(), camera=(), display-capture=(), geolocation=(), gyroscope=(), "
    "magnetometer=(), microphone=(), midi=(), payment=(), usb=(), serial=(), hid=(), "
    "publickey-credentials-get=(), screen-wake-lock=(), xr-spatial-tracking=()"
)
# django-csp: no inline script or style anywhere (htmx comes from static/, its
# indicator styles are off in base.html), nothing loaded from other origins.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "channels",
    "django_tasks",
    "django_tasks_db",
    "motus_web.sessions",
    "csp",
    "axes",
    "motus_web.dashboard",
    "motus_web.chat",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "motus_web.dashboard.middleware.PermissionsPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # After HtmxMiddleware (it reads request.htmx), so it sees the views' redirects.
    "motus_web.dashboard.middleware.LoginRedirectForHtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    "motus_web.dashboard.middleware.PrivateNoStoreMiddleware",
    "motus_web.dashboard.errors.MethodNotAllowedPageMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "motus_web.urls"
ASGI_APPLICATION = "motus_web.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# IMMEDIATE takes the write lock at BEGIN, so two appends to one session queue
# up instead of both reading the same record_count; WAL lets pages read while an
# import writes; a writer waits up to MOTUS_SQLITE_BUSY_SECONDS for the lock
# (Python's default is 5 s: a login during a long import answered "database is
# locked"). Every SQLite database gets them, however it is configured.
_SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL;",
    "timeout": env_int("MOTUS_SQLITE_BUSY_SECONDS", default=30, minimum=1),
}
_DATABASE_URL = env_url("DATABASE_URL", frozenset({"postgres", "postgresql", "sqlite"}))
if _DATABASE_URL:
    # No persistent connections: under ASGI each request's sync code runs in a new
    # thread, so a kept connection is never reused (65 stayed idle for 110 s in a
    # probe); on PostgreSQL the pool below bounds and reuses them instead.
    DATABASES = {"default": dj_database_url.parse(_DATABASE_URL, conn_max_age=0)}
else:
    VAR_DIR.mkdir(exist_ok=True)  # SQLite creates the file, not its folder
    DATABASES = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(VAR_DIR / "db.sqlite3")}
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # psycopg's pool (Django 5.1+): each process holds at most MOTUS_DB_POOL_SIZE
    # connections; a request that finds all in use queues for one up to
    # MOTUS_DB_POOL_TIMEOUT seconds, then fails. Size it so that (web processes +
    # task workers) x MOTUS_DB_POOL_SIZE stays under PostgreSQL's max_connections
    # (100 by default). 0 turns the pool off (a connection per request, closed at
    # its end). With 50 viewers of a long session on 2 cores, 10 s was too short
    # (3 of 200 requests failed waiting): the CPU, not the connections, is the limit.
    _POOL_SIZE = env_int("MOTUS_DB_POOL_SIZE", default=8, minimum=0)
    if _POOL_SIZE:
        _wait = env_int("MOTUS_DB_POOL_TIMEOUT", default=30, minimum=1)
        _pool = {"min_size": 1, "max_size": _POOL_SIZE, "timeout": _wait, "max_idle": 60}
        # A pooled connection is checked before it is handed out (Django passes psycopg's
        # check_connection): after PostgreSQL restarts or drops connections, a request
        # gets a live one, not an error.
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
        DATABASES["default"]["OPTIONS"] = {"pool": _pool, **DATABASES["default"].get("OPTIONS", {})}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {**_SQLITE_OPTIONS, **DATABASES["default"].get("OPTIONS", {})}
    # The tests' database is a file too: Django's default, in memory with a shared
    # cache, locks whole tables ("database table is locked", at once, whatever the
    # busy timeout) when a test's server thread reads while an import thread writes.
    VAR_DIR.mkdir(exist_ok=True)
    DATABASES["default"].setdefault("TEST", {}).setdefault("NAME", str(VAR_DIR / "test.sqlite3"))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_REDIS_URL = env_url("REDIS_URL", frozenset({"redis", "rediss", "unix"}))
if _REDIS_URL:
    # Every channel-layer command (a socket joining its groups, a frame's group_send)
    # holds a pooled connection while it runs, and redis-py's pool (100 by default)
    # refuses past its size rather than wait: with 200 chats connecting at once on one
    # process, commands failed with "Too many connections".
    _REDIS_CONNECTIONS = env_int("MOTUS_REDIS_MAX_CONNECTIONS", default=1000, minimum=10)
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": _REDIS_URL,
                        "max_connections": _REDIS_CONNECTIONS,
                        # channels-redis waits for a socket's next message with BZPOPMIN
                        # 5 s at a time; redis-py 8 reads with a 5 s timeout by default,
                        # so an idle socket's wait raced it and failed as a timeout (three
                        # in a row closed the socket 1013). Reads get longer than a wait;
                        # an unreachable Redis is still found at connect, within 5 s.
                        "socket_timeout": 15,
                        "socket_connect_timeout": 5,
                    }
                ]
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# django-axes counts failed logins per account and address (in the database) and
# refuses that pair for AXES_COOLOFF_MINUTES after AXES_FAILURE_LIMIT failures.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", default=5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", default=15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# Its start-up banner on every manage.py command is noise; lockouts are still logged.
AXES_VERBOSE = False
AXES_LOCKOUT_TEMPLATE = "registration/lockout.html"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:session_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT") or BASE_DIR / "staticfiles")  # collectstatic's
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# Imports: the upload form's limit, and the defaults of `import_sessions`.
MOTUS_UPLOAD_MAX_BYTES = env_int("MOTUS_UPLOAD_MAX_BYTES", default=20 * 1024 * 1024, minimum=1)
# Any request body over this is refused with 413 before it is read (motus_web/body_limit.py):
# the largest upload plus room for the multipart envelope and the form's other fields.
MOTUS_REQUEST_MAX_BYTES = MOTUS_UPLOAD_MAX_BYTES + 64 * 1024
# A compressed upload may expand to this many times the upload limit (gzip of
# repetitive JSON reaches 100x and more: a 3 MB file of 1.2 GB); past it the job stops.
MOTUS_UPLOAD_MAX_PLAIN_RATIO = env_int("MOTUS_UPLOAD_MAX_PLAIN_RATIO", default=10, minimum=1)
MOTUS_UPLOAD_MAX_PLAIN_BYTES = MOTUS_UPLOAD_MAX_BYTES * MOTUS_UPLOAD_MAX_PLAIN_RATIO
# The most messages one upload may hold (its import job stops there); bigger files
# go through `import_sessions` on the server.
MOTUS_UPLOAD_MAX_MESSAGES = env_int("MOTUS_UPLOAD_MAX_MESSAGES", default=50_000, minimum=1)
# An upload is kept in this folder until its import job ends (motus_web/sessions/jobs.py).
MOTUS_IMPORT_SPOOL_DIR = Path(env_str("MOTUS_IMPORT_SPOOL_DIR") or VAR_DIR / "imports")
# Uploads wait for their job in this storage: any Django storage backend (S3 through
# django-storages, say) that every web process and task worker can read.
STORAGES["motus_imports"] = {
    "BACKEND": "django.core.files.storage.FileSystemStorage",
    "OPTIONS": {"location": MOTUS_IMPORT_SPOOL_DIR},
}
# Import jobs are tasks of Django's Tasks interface (the django-tasks backport of
# DEP 14). "database": django-tasks-db, a `manage.py db_worker` or the web process's
# own threads run them; "rq": RQ over REDIS_URL, `manage.py rqworker` runs them.
MOTUS_TASK_BACKEND = env_choice("MOTUS_TASK_BACKEND", frozenset({"database", "rq"}), "database")
if MOTUS_TASK_BACKEND == "rq":
    if not _REDIS_URL:
        raise ImproperlyConfigured("MOTUS_TASK_BACKEND=rq needs REDIS_URL")
    INSTALLED_APPS.append("django_rq")
    TASKS = {"default": {"BACKEND": "django_tasks_rq.RQBackend", "QUEUES": ["default"]}}
    RQ_QUEUES = {"default": {"URL": _REDIS_URL}}
else:
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
# How many import jobs the web process runs at once in its own threads (database
# backend only); 0 leaves them to `manage.py db_worker` processes.
MOTUS_IMPORT_THREADS = env_int("MOTUS_IMPORT_THREADS", default=2, minimum=0)
# Threads of each process for the chat's database calls (``sessions.db_threads``):
# each holds a connection only while a call runs, so with PostgreSQL keep it at most
# MOTUS_DB_POOL_SIZE less the web requests' share.
MOTUS_DB_THREADS = env_int("MOTUS_DB_THREADS", default=4, minimum=1)
# Threads (each an event loop) of each process that run the chat's turns, replays and
# compactions off the loop that moves the sockets' frames (``chat.offload``).
MOTUS_RUN_LOOPS = env_int("MOTUS_RUN_LOOPS", default=2, minimum=1)
# Runs of each process that work at once (``chat.run_slots``); the next ones wait
# their turn, their socket told so, so that the web loop always answers keepalives.
MOTUS_RUN_SLOTS = env_int("MOTUS_RUN_SLOTS", default=8, minimum=1)
# A runner alive is one whose heartbeat (a write between sessions and batches) is this
# recent and, on its own host, whose process (pid and start time) still exists.
MOTUS_IMPORT_STALE_SECONDS = env_int("MOTUS_IMPORT_STALE_SECONDS", default=900, minimum=60)
MOTUS_REPLAY_THRESHOLD = env_int("MOTUS_REPLAY_THRESHOLD", default=3000, minimum=100)
# The folders `sync_sessions` imports from: tool name -> folder, the tools' own
# defaults; MOTUS_SYNC_<TOOL>_DIR (CLAUDE_CODE, CODEX, GEMINI_CLI) points one elsewhere.
MOTUS_SYNC_FOLDERS = {
    tool: Path(env_str(f"MOTUS_SYNC_{tool.upper().replace('-', '_')}_DIR") or default).expanduser()
    for tool, default in (
        ("claude-code", "~/.claude/projects"),
        ("codex", "~/.codex/sessions"),
        ("gemini-cli", "~/.gemini/tmp"),
    )
}
MOTUS_MODEL_NAME = env_str("MOTUS_MODEL_NAME", default="gpt-4o")
# The live chat's models: MOTUS_CHAT_MODELS and MOTUS_CHAT_<NAME>_* (motus_web/providers.py).
MOTUS_CHAT_MODELS = read_chat_models()

LOG_LEVEL = env_choice("LOG_LEVEL", frozenset({"DEBUG", "INFO", "WARNING", "ERROR"}), "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # The memory's compaction warnings are stored as events; don't repeat them on stderr.
        "memory": {"level": "ERROR"},
    },
}
