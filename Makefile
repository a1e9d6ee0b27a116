# dtfx: `make run` and `make test` are all a new user needs; both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONFIG ?= pipeline_config/penguins.yaml
PYTEST_ARGS ?=

.PHONY: setup run test test-fast lint schema golden clean

setup: $(STAMP)

# The whole environment is pinned in requirements.lock; tfx 1.16 declares Python <3.11 but runs on 3.11.
$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip==24.3.1
	$(BIN)/pip install --quiet --disable-pip-version-check --ignore-requires-python -r requirements.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

run: setup  ## run the default pipeline (penguins) locally; a second run comes from cache
	$(BIN)/dtfx run $(CONFIG)

test: setup  ## the whole suite, end-to-end runs included (exit 5, no tests collected, counts as success)
	$(BIN)/python -m pytest $(PYTEST_ARGS) || { rc=$$?; [ $$rc -eq 5 ] && echo "pytest: no tests collected"; [ $$rc -eq 5 ] || exit $$rc; }

test-fast: setup  ## unit and golden tests only
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check pipeline components tests benchmarks

schema: setup  ## regenerate pipeline_config/config.schema.json from the config model
	$(BIN)/dtfx schema > pipeline_config/config.schema.json

golden: setup  ## rewrite the golden files from the current code
	UPDATE_GOLDEN=1 $(BIN)/python -m pytest -m "not slow" -k golden -q

clean:
	rm -rf outputs .pytest_cache
