"""The batching engine: concurrent requests share one generate call, keep their own seeds and results,
settings never mix, one failing request fails alone; and through HTTP with the real tiny model, batched
greedy answers equal the answers served one at a time."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from hpd.policy.backends.base import Generation, Policy
from hpd.serve.engine import BatchEngine

GREEDY = {"n": 1, "max_new_tokens": 8, "temperature": 0.0, "top_p": 1.0, "top_k": 0, "logprobs": False}


class EchoPolicy(Policy):
    """Answers each prompt with ``<prompt>|<seed>``; the first call waits for ``gate`` (so others queue)."""

    def __init__(self, gate: threading.Event | None = None, fail_on: str | None = None):
        self.calls: list[dict] = []
        self.entered = threading.Event()   # set when the first call starts
        self.gate = gate
        self.fail_on = fail_on

    def generate(self, prompts, n=1, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=256, seed=None,
                 logprobs=False):
        self.entered.set()
        if self.gate is not None and not self.calls:
            assert self.gate.wait(30)
        self.calls.append({"prompts": list(prompts), "seed": seed, "temperature": temperature})
        if self.fail_on in prompts:
            raise RuntimeError(f"cannot do {self.fail_on}")
        seeds = seed if isinstance(seed, list) else [seed] * len(prompts)
        return [[Generation(text=f"{p}|{s}")] * n for p, s in zip(prompts, seeds)]


def _wait_queued(engine: BatchEngine, k: int) -> None:
    deadline = time.time() + 30
    while engine.stats()["queued"] < k:
        assert time.time() < deadline, "requests did not queue"
        time.sleep(0.01)


def _submit_all(engine, jobs, gate):
    """Submit ``jobs`` [(prompts, sampling)] at once: the first one holds the engine until the rest queued."""
    with ThreadPoolExecutor(len(jobs)) as ex:
        first = ex.submit(engine.generate, *jobs[0])
        assert engine.policy.entered.wait(30)   # the first request holds the engine
        rest = [ex.submit(engine.generate, *j) for j in jobs[1:]]
        _wait_queued(engine, len(jobs) - 1)
        gate.set()
        return [first.result(30)] + [f.result(30) for f in rest]


def test_queued_requests_go_out_as_one_call_with_their_own_seeds():
    gate = threading.Event()
    pol = EchoPolicy(gate)
    engine = BatchEngine(pol, max_wait_s=0.0)
    jobs = [(["p0"], {**GREEDY, "seed": 7})] + [([f"q{i}", f"r{i}"], {**GREEDY, "seed": 10 * i}) for i in range(1, 5)] \
        + [(["s5"], {**GREEDY, "seed": None})]
    out = _submit_all(engine, jobs, gate)
    engine.close()
    assert [len(c["prompts"]) for c in pol.calls] == [1, 9]         # the lone first call, then one batch
    assert pol.calls[0]["seed"] == 7                                 # a lone request goes out as it came
    assert pol.calls[1]["seed"] == [10, 11, 20, 21, 30, 31, 40, 41, None]   # seeds_for(seed, k) per request
    assert out[0] == [[Generation(text="p0|7")]]
    assert out[2] == [[Generation(text="q2|20")], [Generation(text="r2|21")]]
    assert out[5] == [[Generation(text="s5|None")]]
    assert engine.stats()["batches"] == 2 and engine.stats()["mean_batch_rows"] == 5.0


def test_other_settings_wait_for_their_own_call_and_max_batch_holds():
    gate = threading.Event()
    pol = EchoPolicy(gate)
    engine = BatchEngine(pol, max_batch=2, max_wait_s=0.0)
    hot = {**GREEDY, "temperature": 0.7}
    jobs = [(["a"], GREEDY), (["b"], hot), (["c"], GREEDY), (["d"], GREEDY), (["e"], hot)]
    out = _submit_all(engine, jobs, gate)
    engine.close()
    calls = [(c["prompts"], c["temperature"]) for c in pol.calls]
    # oldest first: b (hot) takes e along; then c, d (greedy; max_batch 2)
    assert calls == [(["a"], 0.0), (["b", "e"], 0.7), (["c", "d"], 0.0)]
    assert [o[0][0].text.split("|")[0] for o in out] == ["a", "b", "c", "d", "e"]


def test_a_failing_request_fails_alone():
    gate = threading.Event()
    pol = EchoPolicy(gate, fail_on="bad")
    engine = BatchEngine(pol, max_wait_s=0.0)
    jobs = [(["x"], GREEDY), (["ok1"], GREEDY), (["bad"], GREEDY), (["ok2"], GREEDY)]
    with ThreadPoolExecutor(4) as ex:
        first = ex.submit(engine.generate, *jobs[0])
        assert pol.entered.wait(30)
        futs = [ex.submit(engine.generate, *j) for j in jobs[1:]]
        _wait_queued(engine, 3)
        gate.set()
        assert first.result(30)[0][0].text == "x|None"
        assert futs[0].result(30)[0][0].text == "ok1|None" and futs[2].result(30)[0][0].text == "ok2|None"
        with pytest.raises(RuntimeError, match="cannot do bad"):
            futs[1].result(30)
    engine.close()
    # the batch of three failed, then each was retried alone
    assert [c["prompts"] for c in pol.calls[1:]] == [["ok1", "bad", "ok2"], ["ok1"], ["bad"], ["ok2"]]


def test_closed_engine_refuses():
    engine = BatchEngine(EchoPolicy())
    assert engine.generate(["a"], GREEDY)[0][0].text == "a|None"
    engine.close()
    with pytest.raises(RuntimeError, match="closed"):
        engine.generate(["b"], GREEDY)


class GatedHF(Policy):
    """The real hf policy behind a gate on its first call (so the other requests queue behind it)."""

    def __init__(self, inner, gate):
        self.inner, self.gate, self.tokenizer, self.calls = inner, gate, inner.tokenizer, []
        self.entered = threading.Event()
        self.context_window = inner.context_window

    def generate(self, prompts, **kw):
        self.entered.set()
        if not self.calls:
            assert self.gate.wait(60)
        self.calls.append(len(prompts))
        return self.inner.generate(prompts, **kw)


@pytest.mark.slow
def test_http_batched_greedy_answers_equal_one_at_a_time(tiny_dir, one_torch_thread):
    from hpd.policy.backends.hf import HFPolicy
    from hpd.serve.app import BackgroundServer

    hf = HFPolicy(str(tiny_dir))
    bodies = [{"messages": [{"role": "user", "content": f"Question {i}: what is {i} + {i}?"}],
               "temperature": 0, "max_tokens": 12} for i in range(6)]
    with BackgroundServer(hf, max_batch=1) as srv:   # one at a time
        alone = [httpx.post(f"{srv.base_url}/chat/completions", json=b, timeout=120).json() for b in bodies]
    gate = threading.Event()
    pol = GatedHF(hf, gate)
    with BackgroundServer(pol, max_wait_s=0.0) as srv:
        engine = srv.app.state.server.engine
        with ThreadPoolExecutor(6) as ex:
            first = ex.submit(httpx.post, f"{srv.base_url}/chat/completions", json=bodies[0], timeout=120)
            assert pol.entered.wait(60)
            rest = [ex.submit(httpx.post, f"{srv.base_url}/chat/completions", json=b, timeout=120) for b in bodies[1:]]
            _wait_queued(engine, 5)
            gate.set()
            together = [f.result(120) for f in [first] + rest]
    assert [r.status_code for r in together] == [200] * 6
    assert pol.calls == [1, 5]
    msg = lambda r: r["choices"][0]["message"]  # noqa: E731
    assert [msg(r.json()) for r in together] == [msg(r) for r in alone]
