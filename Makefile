# `make run`: the dashboard on http://127.0.0.1:$(PORT)/ with the demo sessions.
# `make test`: lint, type-check and the test suite (SQLite, or $DATABASE_URL / $REDIS_URL).
SHELL := /bin/bash
PYTHON ?= python3
PORT ?= 8000
VENV := .venv
BIN := $(VENV)/bin
DEMO_FILES := demo_data/tau-bench/gpt-4o-airline.json \
	demo_data/swe-agent/marshmallow-code__marshmallow-1867.traj

.PHONY: run test chromium

run: $(VENV)/.runtime-installed staticfiles/staticfiles.json
	$(BIN)/python manage.py migrate --noinput -v 0
	@$(BIN)/python manage.py ensure_local_admin -v 0
	@# Idempotent: a second run finds every demo session already there (a line per file).
	@$(BIN)/python manage.py import_sessions -v 0 --owner admin --replay --threshold 3000 \
		--model gpt-4o $(DEMO_FILES)
	@$(BIN)/python manage.py ensure_local_admin -v 0 --url http://127.0.0.1:$(PORT)/
	@# uvicorn streams request bodies, so RequestBodyLimit refuses a large one unread;
	@# --ws-max-size is the chat's frame limit (chat/frames.py MAX_FRAME_BYTES): a bigger
	@# frame is refused (1009) before it is read.
	exec $(BIN)/uvicorn --host 127.0.0.1 --port $(PORT) --ws websockets-sansio --lifespan off \
		--ws-max-size 65536 motus_web.asgi:application

test: $(VENV)/.dev-installed chromium
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/pytest -n 2

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Stamps: pip runs again only when a requirements file changed.
$(VENV)/.runtime-installed: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements-dev.txt requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@ $(VENV)/.runtime-installed

staticfiles/staticfiles.json: $(VENV)/.runtime-installed $(shell find static -type f)
	$(BIN)/python manage.py collectstatic --noinput -v 0

# The browser test drives the Debian Chromium; without it (not root) it skips.
chromium:
	@if ! command -v chromium >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
		else \
			echo "Chromium is not installed and this is not root: the browser test will skip."; \
		fi; \
	fi
