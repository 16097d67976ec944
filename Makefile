# The course's everyday commands. Each one installs what it needs into .venv first.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# nbgrader runs tools of the venv (alembic) by name: put them on PATH.
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: install lab test test-fast notebooks bench gpu-check browser-deps sandbox-deps slurm-deps \
	exchange-deps hub-deps image-deps image-check clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@python3 -c 'import sys; sys.exit(sys.version_info < (3, 11) and "The course needs Python 3.11 or newer; " \
		"python3 is " + sys.version.split()[0] + ": install 3.11 and put it first on PATH.")'
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

install: $(STAMP)

## Open JupyterLab on the learner notebooks. As root (a container, a cloud VM) it adds
## --allow-root; with no display (no DISPLAY or WAYLAND_DISPLAY, not macOS) it opens no browser
## and listens on all addresses: open the printed URL with its token. LAB_ARGS adds options
## (LAB_ARGS="--port=8890").
LAB_ARGS ?=
LAB_FLAGS := $(if $(filter 0,$(shell id -u)),--allow-root) \
	$(if $(DISPLAY)$(WAYLAND_DISPLAY)$(filter Darwin,$(shell uname -s)),,--no-browser --ip=0.0.0.0)
lab: install
	$(VENV)/bin/jupyter lab notebooks/ $(strip $(LAB_FLAGS)) $(LAB_ARGS)

## Debian's chromium for the browser test (root on Debian/Ubuntu; skipped elsewhere).
browser-deps:
	@if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

## Debian's bubblewrap, the kernels' filesystem sandbox when grading (root on Debian/Ubuntu;
## elsewhere the grader says at start that kernels are not isolated, and how to fix it).
sandbox-deps:
	@if ! command -v bwrap >/dev/null && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	fi

## Debian's SLURM and munge, for the one-node cluster of tests/test_slurm.py (root on
## Debian/Ubuntu; skipped elsewhere, and the test says so).
slurm-deps:
	@if ! command -v slurmctld >/dev/null && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null; \
	fi

## The learners' environment on a hub (docs/grading.md, "On a JupyterHub"), for the Unix users
## of tests/test_exchange.py and tests/test_hub.py (root only): a venv of Debian's python3
## outside any home, readable by all (a venv under a mode-700 home cannot be run by others),
## with the course's pins (PyTorch, nbgrader, JupyterLab) and the single-user server.
EXCHANGE_VENV ?= /opt/course-exchange
JUPYTERHUB_PIN := jupyterhub==6.1.1
exchange-deps:
	@if [ "$$(id -u)" = 0 ] && [ ! -x $(EXCHANGE_VENV)/bin/jupyterhub-singleuser ] && [ -x /usr/bin/python3 ]; then \
		if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; \
		fi; \
		/usr/bin/python3 -m venv $(EXCHANGE_VENV) \
		&& $(EXCHANGE_VENV)/bin/pip install --quiet -r requirements.txt $(JUPYTERHUB_PIN) \
		&& chmod -R a+rX,go-w $(EXCHANGE_VENV); \
	fi

## The hub itself for tests/test_hub.py (root only): JupyterHub and the Python port of its
## proxy, in an environment of their own without PyTorch, as a hub's is.
HUB_VENV ?= /opt/course-jupyterhub
hub-deps: exchange-deps
	@if [ "$$(id -u)" = 0 ] && [ ! -x $(HUB_VENV)/bin/configurable-http-proxy ] && [ -x /usr/bin/python3 ]; then \
		/usr/bin/python3 -m venv $(HUB_VENV) \
		&& $(HUB_VENV)/bin/pip install --quiet $(JUPYTERHUB_PIN) configurable-http-proxy==0.4.0; \
	fi

FAST := -m "not slow and not browser"

## Install everything and run the whole test suite: the fast tier (within its budget, as
## test-fast), then the rest; each prints its 25 slowest tests.
test: install browser-deps sandbox-deps slurm-deps exchange-deps hub-deps
	$(PYTHON) scripts/timed_tests.py fast -n 2 $(FAST)
	$(PYTHON) -m pytest -n 2 --durations=25 -m "slow or browser"

## The edit-test loop: no kernels, no nbgrader runs, no fresh Python, no browser (under 60 s). Prints
## the 25 slowest tests and the CPU seconds, and fails past the budget of tests/budget.toml.
test-fast: install
	$(PYTHON) scripts/timed_tests.py fast -n 2 $(FAST)

## Regenerate notebooks/ from solutions/ with nbgrader.
notebooks: install
	$(PYTHON) -m grader generate

## Benchmarks, each against its target (autograding: --jobs 2's speedup over stock nbgrader as a
## share of this machine's parallel ceiling, measured in the same run): writes bench/report.json
## and bench/report.md and prints the tables.
bench: install
	$(PYTHON) -m bench

## The GPU path in one command (under 5 minutes): hidden checks and their tests, integrity,
## a small class autograded and the module benchmark, on CUDA; without CUDA it says so, exit 0.
## Writes $(GPU_CHECK_OUT)/gpu-check.md and .json.
GPU_CHECK_OUT ?= bench/out
gpu-check: install
	$(PYTHON) -m bench.gpu_check --out $(GPU_CHECK_OUT)

## podman (with runc) and debootstrap, for image-check (root on Debian/Ubuntu).
image-deps:
	@if ! { command -v podman && command -v runc && command -v debootstrap; } >/dev/null \
		&& command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null; \
	fi

## Build the grading image (Dockerfile) on a debootstrap Debian, no registry needed, and grade
## planted submissions in it: the same grades.csv as on this machine (scripts/image_check.py).
## IMAGE_BASE=python:3.11-slim-bookworm takes the base from a registry instead.
IMAGE_BASE ?=
image-check: install sandbox-deps image-deps
	$(PYTHON) scripts/image_check.py $(if $(IMAGE_BASE),--base $(IMAGE_BASE))

clean:
	rm -rf $(VENV) .pytest_cache
