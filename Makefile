# The README's two commands: `make demo` (the main job) and `make test` (the whole suite).
# TORCH_SPEC is installed before anything that depends on torch, so pip never pulls a
# multi-GB CUDA build by accident; override it on a machine that needs another build.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
PY := $(VENV)/bin/python
PYTEST_ARGS ?= -n 2

.PHONY: setup demo test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test]"
	touch $@

demo: setup
	$(PY) -m lazyfuse demo

test: setup
	$(PY) -m pytest -q $(PYTEST_ARGS) tests

bench: setup
	$(PY) -m lazyfuse bench

clean:
	rm -rf $(VENV) build *.egg-info
