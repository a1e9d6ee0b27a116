# dtfx: `make run` and `make test` are all a new user needs; both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONFIG ?= pipeline_config/penguins.yaml
IMAGE ?= dtfx:latest
PYTEST_ARGS ?=

# CI sets REQUIRE_BROWSER=1: there, a browser that cannot be installed fails the run instead of skipping tests.
REQUIRE_BROWSER ?= 0

.PHONY: setup browser run sample-data test test-fast lint schema docs structure golden report-png image rehearse clean

setup: $(STAMP)  ## .venv: the pipeline's packages (requirements.lock) and the development tools (requirements-dev.lock)

# Pinned by the script the Dockerfile runs: requirements.lock, what a pipeline needs and all the pipeline image holds,
# then (--dev) the tools of the tests, `make lint` and `dtfx rehearse` from requirements-dev.lock and
# requirements-dev-nodeps.lock, which pin no package of requirements.lock: the tests run on the image's packages.
# Python packages only: running a pipeline needs no system package.
$(STAMP): requirements.lock requirements-dev.lock requirements-dev-nodeps.lock scripts/install-locked.sh pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	scripts/install-locked.sh $(BIN)/python --dev
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

run: setup  ## run the default pipeline (penguins) locally; a second run comes from cache
	@case "$(CONFIG)" in */digits.yaml|*/reviews.yaml) \
	  name=$$(basename $(CONFIG) .yaml); $(BIN)/dtfx sample-data $$name data/$$name;; esac
	$(BIN)/dtfx run $(CONFIG)

sample-data: setup  ## the data of pipeline_config/digits.yaml and reviews.yaml, made here, under data/
	$(BIN)/dtfx sample-data digits data/digits
	$(BIN)/dtfx sample-data reviews data/reviews

# Headless Chromium renders the run report in its browser tests (Debian packages; installing them needs root and
# apt-get). Where that cannot be done, those tests are skipped and say why.
browser:
	@command -v chromedriver >/dev/null 2>&1 && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	   && apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium chromium-driver; then exit 0; fi; \
	echo "make test: chromium and chromedriver could not be installed (needs root and apt-get);" \
	     "the report's browser tests will be skipped" >&2; \
	[ "$(REQUIRE_BROWSER)" != 1 ]

# The suite's end-to-end runs mostly keep one core busy each: two pytest processes (pytest-xdist), each taking whole
# test files so that a file's shared pipeline runs stay in one process. TEST_WORKERS=0 runs everything in one.
TEST_WORKERS ?= 2

# PYTEST_ARGS narrows the run (make test PYTEST_ARGS="tests/test_config.py -k bounds"); one that selects no test fails
# (pytest's exit code 5), as a typo in it should. The 30 slowest tests are listed at the end, so that CI's log says
# where the suite's time goes (it must stay under 40 minutes).
test: setup browser  ## the whole suite, end-to-end runs included; PYTEST_ARGS=... runs part of it
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30 $(PYTEST_ARGS)

test-fast: setup  ## unit and golden tests only; PYTEST_ARGS=... as for make test
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# vermin: no code of the steps needs a newer Python than the image's (the Dockerfile's PYTHON_VERSION).
lint: setup  ## ruff, and vermin for the image's Python (both from requirements-dev.lock)
	$(BIN)/ruff check pipeline components tests benchmarks scripts
	$(BIN)/vermin --no-tips --violations --target=$$($(BIN)/python -m dtfx.pipeline.kubeflow.image python)- pipeline components

schema: setup  ## regenerate pipeline_config/config.schema.json from the config model
	$(BIN)/dtfx schema > pipeline_config/config.schema.json

# The reference pages are written from the code (the config model, the CLI's parser); the site is built in strict mode
# (mkdocs.yml's validation: a broken link or anchor fails). `.venv/bin/mkdocs serve` serves it while you edit.
docs: setup  ## regenerate docs/reference/ (config keys, CLI verbs) from the code and build the site into site/
	$(BIN)/python -m dtfx.pipeline.config_reference > docs/reference/config.md
	$(BIN)/python -m dtfx.pipeline.cli_reference > docs/reference/cli.md
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

structure: setup  ## the house's map in figures: its rooms and their lines, the longest functions, import circles
	$(BIN)/python -m scripts.structure

golden: setup  ## rewrite the golden files from the current code
	UPDATE_GOLDEN=1 $(BIN)/python -m pytest -m "not slow" -k golden -q

report-png: setup  ## docs/report.png from a run directory: make report-png RUN=outputs/penguins/runs/<timestamp>
	$(BIN)/python scripts/screenshot_report.py $(RUN) docs/report.png --width 1200 --height 1750

image:  ## build the Kubeflow step image where Docker exists; then docker push it and set kubeflow.image
	@command -v docker >/dev/null 2>&1 || { echo "make image: Docker is not installed here; build the image where it is" >&2; exit 1; }
	tar --exclude=__pycache__ -cf - Dockerfile requirements.lock scripts/install-locked.sh \
	  pyproject.toml setup.py README.md pipeline components | docker build -t $(IMAGE) -

rehearse: setup  ## run the default pipeline as Kubeflow would: compiled file, steps as subprocesses (minutes)
	$(BIN)/dtfx rehearse $(CONFIG)

clean:  ## remove outputs/, data/, the test cache and the built site
	rm -rf outputs data .pytest_cache site
