"""Generation: every selected BFCL entry through a policy, as BFCL result entries, resumable from a shard log.

Each entry is an *episode*, a generator that yields the conversation it needs a completion for and receives the
:class:`~hpd.policy.backends.base.Generation`; :func:`drive` keeps up to ``batch_size`` episodes in flight and
answers all their pending prompts with one ``policy.generate`` call per wave (the same idea as hpd's rollouts), so
a GPU backend sees full batches even in multi-turn.

* Single-turn (:func:`single_turn`): the entry's first (only) turn, one completion, :func:`hpd.bfcl.prompt.parse_reply`.
* Multi-turn (:func:`multi_turn`): BFCL's ``BaseHandler.inference_multi_turn_FC`` loop, step by step: the turn's user
  messages are appended; the model is asked again until a reply decodes to no call (or fails to decode); each
  decoded step's calls (``convert_to_function_call``, the strings BFCL executes) run in the sandbox
  (:class:`hpd.bfcl.sandbox.Executor`) and their results go back as ``tool`` messages; more than
  ``MAXIMUM_STEP_LIMIT`` (20) steps in a turn force-quits the entry (it then fails with ``force_terminated``); at a
  ``miss_func`` holdout turn the withheld function docs are added and the user message is BFCL's
  ``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC``.

Departures from ``bfcl generate`` (each also in docs/bfcl.md): greedy decoding by default (BFCL sends
temperature 0.001); ``latency`` is a wave's wall time divided by the prompts in it; a generation the engine
refuses (the prompt fills the context window) or a request that fails becomes BFCL's own
``"Error during inference: ..."`` result; a sandbox timeout or crash ends the multi-turn entry early (it then fails
as force-terminated; BFCL would hang or crash).

Records (one per entry, the shard log key is ``id``) are BFCL result entries, ``{"id", "result",
"input_token_count", "output_token_count", "latency"}``, plus ``"hpd": {"category", "raw", "parse", ...}`` with the
completions and why a reply did not parse.
"""

from __future__ import annotations

import time
import zlib
from copy import deepcopy
from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterable

from hpd.bfcl import lib
from hpd.bfcl.data import Case, is_multi_turn
from hpd.bfcl.prompt import parse_reply, render, tool_messages, tools_for

Episode = Generator[tuple, Any, dict]


@dataclass
class GenConfig:
    """How completions are sampled (``temperature=0``: greedy) and how many episodes are in flight."""

    max_new_tokens: int = 512
    temperature: float = 0.0
    seed: int = 0
    enable_thinking: bool = False
    batch_size: int = 32


def _seed(cfg: GenConfig, key: str) -> int:
    return (cfg.seed * 1_000_003 + zlib.crc32(key.encode())) & 0x7FFFFFFF


def _error_record(case: Case, err: str, raw: list, parse: list) -> dict:
    return {"id": case.id, "result": f"Error during inference: {err}", "input_token_count": 0,
            "output_token_count": 0, "latency": 0.0,
            "hpd": {"category": case.category, "raw": raw, "parse": parse, "error": err}}


def single_turn(case: Case) -> Episode:
    """One completion for the entry's only turn (BFCL's ``inference_single_turn_FC``)."""
    messages = list(case.entry["question"][0])
    g = yield (messages, tools_for(case.entry["function"]), f"{case.id}")
    if g.error:
        return _error_record(case, g.error, [], [])
    reply = parse_reply(g.text)
    return {"id": case.id, "result": reply.result, "input_token_count": g.input_tokens,
            "output_token_count": g.output_tokens, "latency": g.latency,
            "hpd": {"category": case.category, "raw": [g.text], "parse": [reply.error]}}


def multi_turn(case: Case, executor: Any) -> Episode:
    """BFCL's multi-turn FC inference loop (module doc); every call runs in ``executor`` (the sandbox)."""
    lib.load()
    from bfcl_eval.constants.default_prompts import (DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
                                                     MAXIMUM_STEP_LIMIT)
    from bfcl_eval.model_handler.utils import convert_to_function_call

    entry = deepcopy(case.entry)
    functions, holdout = list(entry["function"]), entry.get("missed_function", {})
    tools, messages = tools_for(functions), []
    turns: list[list] = []
    stats = {"input": [], "output": [], "latency": [], "raw": [], "parse": [], "end": "complete"}
    try:
        for t, turn_messages in enumerate(entry["question"]):
            if str(t) in holdout:
                functions += holdout[str(t)]
                tools = tools_for(functions)
                turn_messages = [{"role": "user", "content": DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC}]
            messages += turn_messages
            steps, ins, outs, lats = [], [], [], []
            turns.append(steps)
            for count in range(MAXIMUM_STEP_LIMIT + 2):
                if count > MAXIMUM_STEP_LIMIT:
                    stats["end"] = f"force_quit: more than {MAXIMUM_STEP_LIMIT} steps in turn {t}"
                    break
                g = yield (messages, tools, f"{case.id}:{t}:{count}")
                if g.error:
                    return _error_record(case, g.error, stats["raw"], stats["parse"])
                reply = parse_reply(g.text, id_prefix=f"t{t}s{count}")
                messages.append(reply.message)
                steps.append(reply.result)
                ins.append(g.input_tokens), outs.append(g.output_tokens), lats.append(g.latency)
                stats["raw"].append(g.text), stats["parse"].append(reply.error)
                if not reply.calls:
                    break
                try:
                    results = executor.execute(entry, convert_to_function_call(reply.result))
                except Exception as e:  # SandboxError: timeout / crash caused by this entry's calls
                    stats["end"] = f"sandbox_error: {e}"
                    break
                messages += tool_messages(reply.message, results)
            stats["input"].append(ins), stats["output"].append(outs), stats["latency"].append(lats)
            if stats["end"] != "complete":
                break
    finally:
        executor.finish(case.id)
    return {"id": case.id, "result": turns, "input_token_count": stats["input"],
            "output_token_count": stats["output"], "latency": stats["latency"],
            "hpd": {"category": case.category, "raw": stats["raw"], "parse": stats["parse"], "end": stats["end"]}}


@dataclass
class Answer:
    """What an episode receives for its prompt."""

    text: str = ""
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency: float = 0.0


def _generate(policy: Any, tokenizer: Any, requests: list[tuple], cfg: GenConfig) -> list[Answer]:
    prompts, errors = [], {}
    for i, (messages, tools, _key) in enumerate(requests):
        try:
            prompts.append(render(tokenizer, messages, tools, enable_thinking=cfg.enable_thinking))
        except Exception as e:  # a conversation the template cannot render
            errors[i] = f"render failed: {type(e).__name__}: {e}"
            prompts.append(None)
    todo = [i for i, p in enumerate(prompts) if p is not None]
    t0 = time.perf_counter()
    try:
        gens = policy.generate([prompts[i] for i in todo], n=1, temperature=cfg.temperature,
                               max_new_tokens=cfg.max_new_tokens,
                               seed=[_seed(cfg, requests[i][2]) for i in todo]) if todo else []
    except Exception as e:  # an engine / HTTP failure: BFCL records it as an inference error
        gens, errors = [], {**errors, **{i: f"{type(e).__name__}: {e}" for i in todo}}
    lat = (time.perf_counter() - t0) / max(len(todo), 1)
    out = [Answer(error=errors.get(i, "no generation")) for i in range(len(requests))]
    for i, per in zip(todo, gens):
        g = per[0]
        n_in = len(g.prompt_token_ids) if g.prompt_token_ids else \
            len(tokenizer(prompts[i], add_special_tokens=False)["input_ids"])
        out[i] = Answer(text=g.text, error=(g.error or "generation failed") if g.finish_reason == "error" else None,
                        input_tokens=n_in, output_tokens=len(g.token_ids), latency=round(lat, 4))
    return out


def drive(episodes: Iterable[Episode], policy: Any, tokenizer: Any, cfg: GenConfig,
          on_done: Callable[[dict], None]) -> None:
    """Run ``episodes`` with up to ``cfg.batch_size`` in flight, one ``generate`` call per wave (module doc)."""
    source = iter(episodes)
    active: list[tuple[Episode, tuple]] = []

    def admit() -> None:
        while len(active) < cfg.batch_size:
            ep = next(source, None)
            if ep is None:
                return
            try:
                active.append((ep, next(ep)))
            except StopIteration as stop:
                on_done(stop.value)

    admit()
    while active:
        answers = _generate(policy, tokenizer, [req for _, req in active], cfg)
        still: list[tuple[Episode, tuple]] = []
        for (ep, _), ans in zip(active, answers):
            try:
                still.append((ep, ep.send(ans)))
            except StopIteration as stop:
                on_done(stop.value)
        active[:] = still
        admit()


def guarded(case: Case, episode: Episode) -> Episode:
    """``episode``, except that an unexpected error inside it becomes that entry's inference error, not a crash."""
    try:
        return (yield from episode)
    except Exception as e:
        return _error_record(case, f"hpd: {type(e).__name__}: {e}", [], [])


def episodes_for(cases: list[Case], executor: Any) -> Iterable[Episode]:
    """The episode of each case (multi-turn ones need the sandbox ``executor``)."""
    for case in cases:
        yield guarded(case, multi_turn(case, executor) if is_multi_turn(case.category) else single_turn(case))
