# hubkit developer commands. `make test` and `make demo` work on a fresh machine.
PYTHON ?= python3.11
VENV := .venv
VERL_VENV := .venv-verl
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
VERL_STAMP := $(VERL_VENV)/.installed
# torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build.
TORCH := torch==2.13.0

.PHONY: venv venv-verl test lint format demo bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q $(TORCH) -e '.[test]'
	touch $@

# verl 0.6.1 needs transformers<5, numpy<2 and peft<0.21 (research/verl.md §8): its own environment,
# holding only hubkit's light core beside it.
venv-verl: $(VERL_STAMP)

$(VERL_STAMP): recipes/verl_gdpo/requirements.txt pyproject.toml
	test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q --upgrade pip
	$(VERL_VENV)/bin/python -m pip install -q $(TORCH)
	$(VERL_VENV)/bin/python -m pip install -q $(TORCH) -r recipes/verl_gdpo/requirements.txt
	$(VERL_VENV)/bin/python -m pip install -q --no-deps -e .
	touch $@

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

test: venv venv-verl lint
	$(VENV)/bin/pytest

demo: venv
	$(VENV)/bin/python -m hubkit.demo

bench: venv
	for b in bench/*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(VERL_VENV) .pytest_cache build *.egg-info
