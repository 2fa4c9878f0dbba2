"""How long ``hpd demo`` will take, and how far it has got (:class:`hpd.demo.Demo` uses this).

**Calibration** (:func:`calibrate`: a few seconds for SmolLM2 on a laptop CPU, well under one for the tiny
model). Before its first stage a demo times a random-weight copy of its base model's architecture
(:func:`model_config`) in the run's dtype, on the device the stages use:

* *train tokens/s*: one forward + backward over random token ids, sized to take about
  :data:`CALIBRATION_S` by a 64-token probe first (128 to 2,048 tokens). Under LoRA the weights are frozen and
  only the activations get gradients (what a LoRA backward computes, less the adapters' small products); under
  full fine-tuning every weight gets one;
* *generated tokens/s* and *prompt tokens/s*: greedy generation for a batch of 32 prompts of 16 tokens, once with
  1 new token (the prefill and one step) and once with 1 + 4 (every row runs to the cap): the 4 extra steps give
  the decoding rate over the batch, the rest of the first call the prefill rate.

**Work counts** (:class:`Work`). Before the data exists they are predicted (:func:`predict_work`): the built-in
benchmark has 12 n tasks for ``--n-per-domain n`` (4 domains x (2 n parallel + n sequential)), 90 % of them
train tasks (capped by ``--train-limit`` / ``--train-sample``) with :data:`BOUNDARIES_PER_TASK` boundaries each,
10 % held out (capped by ``--test-limit``); tokens per row and prompt: :data:`TOKENS_GUESS`. Once the replay has
run they are counted, the tokens of each view's rows and prompts are measured with the base model's tokenizer on
16 boundaries (:func:`measure_work`), and the stages still to run are estimated again.

**Stage estimates** (:func:`stage_seconds`; S = :data:`STAGE_OVERHEAD_S`, what a stage that loads a model costs
besides its tokens: 4 s to train, 1 s to generate;
new = :data:`GEN_SHARE` x ``max_new_tokens``, the tokens a turn or proposal generates on average before its end
of turn, finished rows stop computing; a prompt is prefilled once, its candidates and later attempts reuse it):

===============================  ==============================================================================
``train <variant>``              S + updates x global_batch x tokens per row / train tokens/s. Tokens per row:
                                 the T view's (SFT, HPD-T), the I view's (the teacher's warm-up, updates/4 by
                                 default), the mean of T, I and R (HPD); at most ``max_length``; x
                                 :data:`GROUPED_SHARE` when episodes are grouped (their shared prompt is
                                 computed once)
``teach``                        S + boundaries x I prompt / prompt tokens/s + boundaries x K x attempts x
                                 :data:`ATTEMPT_SHARE` x new / generated tokens/s (a boundary stops at its first
                                 verified proposal); S alone for ``--teacher oracle`` (no model)
``choose teacher``               2 x (S + probes x I prompt / prompt tokens/s + probes x K x new / generated
                                 tokens/s), probes = min(n_probe, boundaries), one attempt
``eval <variant>``               S + (turns + gold boundaries) x (T prompt / prompt tokens/s + new / generated
                                 tokens/s): each turn prefills its whole context (no cache across turns); turns =
                                 each held-out task's reference turns (``Task.n_boundaries``) capped by the turn
                                 budget (a policy that loops to the budget takes longer)
``data``, ``split``, ``base``    :data:`FIXED_S`; ``replay + documents``: :data:`REPLAY_S_PER_TASK` per train task
the baselines                    not estimated (shown as such)
===============================  ==============================================================================

**Progress** (:class:`Tracker`): the elapsed time, and the time left = ``f`` x (the estimates of the stages not
started yet) + what is left of the current one: ``f`` x its estimate less its elapsed time (at least 0), or, once
it reports its own progress (the teacher, per wave), its elapsed time x (1 - done) / done. ``f`` = (measured + P) /
(estimated + P) over the stages that ran in this process (resumed ones cost nothing and are left out), P =
:data:`PRIOR_SHARE` x the total estimate: the estimate corrected by the measured progress, trusted more the more
of it has run. :class:`TerminalLine` draws it as one line on a terminal.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

#: seconds the calibration's timed training step aims at
CALIBRATION_S = 1.0
#: seconds of the stages that load no model (``base model``: per model kind; a local folder costs nothing)
FIXED_S = {"data": 2.0, "split": 1.0, "base model": {"tiny": 3.0, "smollm2": 30.0, "folder": 0.0}}
#: replay + documents, seconds per train task
REPLAY_S_PER_TASK = 0.05
#: a stage that loads a model: training (load, view building, probes, saving) and generation (teacher, evaluation)
STAGE_OVERHEAD_S = {"train": 4.0, "generate": 1.0}
#: share of a row's tokens computed when the episodes of a batch stay together (shared-prefix batching)
GROUPED_SHARE = 0.5
#: share of max_new_tokens a turn or proposal generates on average
GEN_SHARE = 0.5
#: share of the attempts a boundary uses on average before the teacher's first verified proposal
ATTEMPT_SHARE = 0.5
#: predicted counts before the data exists (module doc)
BOUNDARIES_PER_TASK = 2.5
TRAIN_SHARE = 0.9
#: tokens per training row / per prompt before any was measured: {model kind: {view: tokens}}
TOKENS_GUESS = {"tiny": {"T": 400.0, "I": 700.0, "R": 600.0}, "real": {"T": 750.0, "I": 1100.0, "R": 900.0}}
#: weight of the prior (the estimate itself) in the correction factor, as a share of the total estimate
PRIOR_SHARE = 0.1
#: teachers probed by ``--teacher auto``
PROBED_TEACHERS = 2


# ------------------------------------------------------------------------------------------ the numbers
@dataclass(frozen=True)
class Calibration:
    """This machine's speed on the base model (module doc)."""

    train_tokens_per_s: float         # forward + backward
    gen_tokens_per_s: float           # generated tokens, over a batch
    prefill_tokens_per_s: float       # prompt tokens (forward only)
    seconds: float = 0.0              # what the calibration took
    device: str = "cpu"
    dtype: str = "float32"

    def to_record(self) -> dict:
        return asdict(self)


@dataclass
class Work:
    """The work counts of one demo cell (module doc)."""

    train_tasks: int
    train_boundaries: int
    test_tasks: int
    test_turns: float                 # over the held-out tasks: the turns their episodes are expected to take
    test_boundaries: int              # their gold-history boundaries (Action-Acc)
    row_tokens: dict[str, float] = field(default_factory=dict)     # view -> mean tokens of a training row
    prompt_tokens: dict[str, float] = field(default_factory=dict)  # view -> mean prompt tokens (T: eval, I: teacher)
    measured: bool = False            # counted from the data (else predicted)


def predict_work(cfg: Any) -> Work:
    """The counts before the data exists (module doc); ``cfg`` is a :class:`hpd.demo.DemoConfig`."""
    tasks = 12 * cfg.n_per_domain
    train = int(round(TRAIN_SHARE * tasks))
    test = tasks - train
    for cap in (cfg.train_limit, cfg.train_sample):
        if cap:
            train = min(train, cap)
    if cfg.test_limit:
        test = min(test, cfg.test_limit)
    guess = TOKENS_GUESS["tiny" if cfg.model == "tiny" else "real"]
    return Work(train_tasks=train, train_boundaries=int(round(BOUNDARIES_PER_TASK * train)), test_tasks=test,
                test_turns=min(BOUNDARIES_PER_TASK, _turn_budget(cfg)) * test,
                test_boundaries=int(round(BOUNDARIES_PER_TASK * test)), row_tokens=dict(guess),
                prompt_tokens={"T": guess["T"], "I": guess["I"]})


def measure_work(cfg: Any, boundaries: list, test_tasks: list, tokenizer_dir: str | Path, sample: int = 16) -> Work:
    """The counts of the replayed data; tokens per row (prompt + completion, at most ``max_length``) and per
    prompt measured with the base model's tokenizer on ``sample`` boundaries spread over the list."""
    from hpd.views.token_lengths import load_tokenizer_dir, row_lengths
    from hpd.views.render import Renderer

    renderer = Renderer(load_tokenizer_dir(tokenizer_dir))
    picked = boundaries[:: max(1, len(boundaries) // sample)][:sample]
    rows: dict[str, list[float]] = {}
    prompts: dict[str, list[float]] = {}
    for b in picked:
        try:
            doc = b.document_text(cfg.teach_privilege)
        except KeyError:
            doc = None
        for view, (p, c) in row_lengths(renderer, b.context, b.reference, doc).items():
            rows.setdefault(view, []).append(min(p + c, cfg.max_length))
            prompts.setdefault(view, []).append(p)
    budget = _turn_budget(cfg)
    return Work(train_tasks=len({b.task_uid for b in boundaries}), train_boundaries=len(boundaries),
                test_tasks=len(test_tasks), test_turns=float(sum(min(t.n_boundaries, budget) for t in test_tasks)),
                test_boundaries=sum(t.n_boundaries for t in test_tasks),
                row_tokens={v: sum(xs) / len(xs) for v, xs in rows.items()},
                prompt_tokens={v: sum(xs) / len(xs) for v, xs in prompts.items()}, measured=True)


def _turn_budget(cfg: Any) -> int:
    return cfg.eval_turns or cfg.max_turns or 8


def _row_tokens(work: Work, views: Iterable[str], cfg: Any) -> float:
    """Mean tokens of a training row over ``views`` (a view not measured counts as the T view)."""
    views = list(views)
    t = work.row_tokens.get("T", 0.0)
    n = sum(work.row_tokens.get(v, t) for v in views) / len(views)
    return n * (GROUPED_SHARE if cfg.group_episodes else 1.0)


def generation_s(cfg: Any, cal: Calibration, prompts: float, prompt_tokens: float, turns: float) -> float:
    """Seconds to prefill ``prompts`` prompts of ``prompt_tokens`` and generate ``turns`` turns or proposals of
    :data:`GEN_SHARE` x ``max_new_tokens`` tokens."""
    return (prompts * prompt_tokens / cal.prefill_tokens_per_s
            + turns * GEN_SHARE * cfg.max_new_tokens / cal.gen_tokens_per_s)


#: training stages: name -> views of a row
_TRAIN = {"train SFT": ("T",), "train HPD-T": ("T",), "train HPD": ("T", "I", "R"),
          "train teacher warm-up (I view)": ("I",)}


def stage_seconds(stage: str, cfg: Any, work: Work, cal: Calibration) -> float | None:
    """The estimate of one stage (module doc); None for a stage it does not estimate (the baselines)."""
    if stage in ("data", "split"):
        return FIXED_S[stage]
    if stage == "base model":
        return FIXED_S["base model"].get(cfg.model, FIXED_S["base model"]["folder"])
    if stage == "replay + documents":
        return REPLAY_S_PER_TASK * work.train_tasks
    if stage in _TRAIN:
        updates = cfg.updates
        if stage.startswith("train teacher"):
            updates = cfg.warm_updates or max(1, round(cfg.updates / 4))
        return STAGE_OVERHEAD_S["train"] + updates * cfg.global_batch * _row_tokens(work, _TRAIN[stage], cfg) \
            / cal.train_tokens_per_s
    prompt_i = work.prompt_tokens.get("I", work.prompt_tokens.get("T", 0.0))
    s = STAGE_OVERHEAD_S["generate"]
    if stage == "teach":
        if cfg.teacher == "oracle":
            return s
        n = work.train_boundaries
        return s + generation_s(cfg, cal, n, prompt_i,
                                               n * cfg.teach_k * cfg.teach_attempts * ATTEMPT_SHARE)
    if stage == "choose teacher":
        n = min(cfg.n_probe, work.train_boundaries)
        return PROBED_TEACHERS * (s + generation_s(cfg, cal, n, prompt_i, n * cfg.teach_k))
    if stage.startswith("eval "):
        turns = work.test_turns + work.test_boundaries      # every turn prefills its whole context again
        return s + generation_s(cfg, cal, turns, work.prompt_tokens.get("T", 0.0), turns)
    return None


def estimate(stages: Iterable[str], cfg: Any, work: Work, cal: Calibration) -> dict[str, float | None]:
    """``{stage: seconds or None}`` in the order given (rounded to 0.1 s)."""
    out = {}
    for s in stages:
        sec = stage_seconds(s, cfg, work, cal)
        out[s] = None if sec is None else round(sec, 1)
    return out


def total(est: dict[str, float | None], skip: Iterable[str] = ()) -> float:
    """Sum of the estimates, ``skip`` and the stages not estimated left out."""
    skip = set(skip)
    return sum(v for k, v in est.items() if v is not None and k not in skip)


# ------------------------------------------------------------------------------------------ calibration
def model_config(model: str, size: str = "xs", base_dir: str | Path | None = None):
    """The architecture to calibrate on: ``base_dir``'s ``config.json`` when the base model is there, else the
    tiny model's (:data:`hpd.policy.tiny.SIZES`) or SmolLM2's (read from the GGUF's metadata)."""
    from transformers import AutoConfig

    if base_dir is not None and (Path(base_dir) / "config.json").is_file():
        return AutoConfig.from_pretrained(str(base_dir))
    if model == "tiny":
        from transformers import Qwen3Config

        from hpd.policy.tiny import SIZES

        s = SIZES[size]
        return Qwen3Config(vocab_size=s.vocab_size + 6, hidden_size=s.hidden_size,
                           intermediate_size=s.intermediate_size, num_hidden_layers=s.num_hidden_layers,
                           num_attention_heads=s.num_attention_heads, num_key_value_heads=s.num_key_value_heads,
                           head_dim=s.head_dim, tie_word_embeddings=True, pad_token_id=0)
    if model == "smollm2":
        from hpd.policy.smollm2 import GGUF_NAME, locate_gguf

        gguf, _ = locate_gguf()
        cfg = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=GGUF_NAME)
        if hasattr(cfg, "quantization_config"):
            del cfg.quantization_config
        return cfg
    raise ValueError(f"no config.json in {base_dir or model}")


def _dtype_name(dtype: str, device: str) -> str:
    try:
        from hpd.policy.dtype import resolve_dtype_name
    except ImportError:   # a checkout without --dtype computes in float32
        return "float32" if dtype == "auto" else dtype
    return resolve_dtype_name(dtype, device)


_CACHE: dict[tuple, Calibration] = {}


def calibrate(config, *, full_finetune: bool, dtype: str = "float32", device: str | None = None,
              batch: int = 32, prompt: int = 16, steps: int = 4, cache_key: Any = None) -> Calibration:
    """Time one forward + backward and two short generations of a random-weight model of ``config`` (module
    doc); torch's global RNG is left as it was. ``cache_key``: a calibration with the same key (and options)
    in this process is reused (a study's cells)."""
    import torch
    from transformers import AutoModelForCausalLM

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    key = None if cache_key is None else (cache_key, full_finetune, dtype, device, batch, prompt, steps)
    if key is not None and key in _CACHE:
        return _CACHE[key]
    name = _dtype_name(dtype, device)
    t_start = time.perf_counter()

    def timed(fn) -> float:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return max(time.perf_counter() - t, 1e-6)

    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    try:
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, name)).to(device)
        vocab = int(config.vocab_size)

        def step(rows: int, n: int) -> None:
            ids = torch.randint(0, vocab, (rows, n)).to(device)
            if full_finetune:
                out = model(input_ids=ids, labels=ids)
            else:
                emb = model.get_input_embeddings()(ids).detach().requires_grad_(True)
                out = model(inputs_embeds=emb, labels=ids)
            out.loss.backward()
            model.zero_grad(set_to_none=True)

        model.train()
        for p in model.parameters():
            p.requires_grad_(full_finetune)

        def warm_timed(rows: int, n: int) -> float:
            """The second of two calls at one shape: a first call at a new shape also pays one-off kernel set-up
            (205 against 223 tokens/s for SmolLM2 in bf16 on one thread, 2026-12-05)."""
            step(rows, n)
            return timed(lambda: step(rows, n))

        probe = 64 / warm_timed(1, 64)
        n = int(min(2048, max(128, probe * CALIBRATION_S)))
        rows = -(-n // 256)
        train_tps = rows * (n // rows) / warm_timed(rows, n // rows)

        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        ids = torch.randint(0, vocab, (batch, prompt)).to(device)
        pad = config.pad_token_id if config.pad_token_id is not None else 0
        kw = dict(attention_mask=torch.ones_like(ids), do_sample=False, pad_token_id=pad)
        with torch.no_grad():
            first = min(timed(lambda: model.generate(ids, max_new_tokens=1, min_new_tokens=1, **kw))
                        for _ in range(2))
            more = min(timed(lambda: model.generate(ids, max_new_tokens=1 + steps, min_new_tokens=1 + steps, **kw))
                       for _ in range(2))
    finally:
        torch.random.set_rng_state(state)
    gen_tps, prefill_tps = generation_rates(first, more, steps=steps, batch=batch, prompt=prompt,
                                            train_tps=train_tps)
    cal = Calibration(train_tokens_per_s=round(train_tps, 1), gen_tokens_per_s=round(gen_tps, 1),
                      prefill_tokens_per_s=round(prefill_tps, 1),
                      seconds=round(time.perf_counter() - t_start, 2), device=device, dtype=name)
    if key is not None:
        _CACHE[key] = cal
    return cal


def thread_probe(threads: int, n: int = 200) -> float:
    """Seconds of ``n`` small matmuls + tanh (64 x 576 @ 576 x 576, a short trie node's shape) on ``threads`` torch
    threads, the faster of two runs after a warm-up: fine-grained parallel work like a training update's, where
    every op waits for all its threads."""
    import torch

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(64, 576, generator=g), torch.randn(576, 576, generator=g) / 24

    def run() -> None:
        y = x
        for _ in range(n):
            y = torch.tanh(y @ w)

    run()
    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t)
    return best


def choose_threads(env: dict | None = None, probe: Callable[[int], float] = thread_probe) -> tuple[int, str | None]:
    """Torch's thread count for a demo on the CPU: all cores, or 1 when the probe runs faster on 1. With another
    process busy on one of 2 cores, every parallel op waits for a thread the scheduler has parked: measured on
    2026-12-05, :func:`thread_probe` took 0.82-0.92 s on 2 threads against 0.054 s on 1, and the calibration's
    training step ran at 7 tokens/s against 223. ``OMP_NUM_THREADS`` in ``env`` (default ``os.environ``) is the
    user's choice and is kept. Returns (threads, a line saying why, or None when nothing changed)."""
    import os

    import torch

    env = os.environ if env is None else env
    n = torch.get_num_threads()
    if n <= 1 or env.get("OMP_NUM_THREADS"):
        return n, None
    t_all, t_one = probe(n), probe(1)
    best = 1 if t_one < t_all else n
    torch.set_num_threads(best)
    if best == n:
        return n, None
    return 1, (f"threads: 1 of {n}: the probe ran {t_all / t_one:.1f}x slower on {n} threads than on 1 (another "
               f"process holds a core); set OMP_NUM_THREADS to choose")


def generation_rates(first: float, more: float, *, steps: int, batch: int, prompt: int,
                     train_tps: float) -> tuple[float, float]:
    """(generated tokens/s, prompt tokens/s) from the seconds of a 1-token and a (1 + ``steps``)-token
    generation of ``batch`` prompts of ``prompt`` tokens. When load makes the longer call no slower than the
    shorter one (their difference is noise), every step of the longer call is counted as decoding, an upper
    bound on a step's cost, rather than dividing by a difference near zero (a calibration under load once read
    32,000,000 generated tokens/s)."""
    per_step = (more - first) / steps
    if per_step <= 0.05 * first:
        per_step = more / (1 + steps)
    prefill = first - per_step
    return batch / per_step, (batch * prompt / prefill if prefill > 0 else 3 * train_tps)


# ------------------------------------------------------------------------------------------ words
def duration(seconds: float) -> str:
    """``42s``, ``3m12s``, ``1h05m``."""
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def minutes(seconds: float) -> str:
    """``~N min``: one decimal under 10 minutes, whole minutes above."""
    m = seconds / 60
    return f"~{m:.1f} min" if m < 10 else f"~{m:.0f} min"


def headline(est: dict[str, float | None], cal: Calibration, done: Iterable[str] = ()) -> str:
    """``estimated total: ~N min (calibrated: X train tokens/s, Y generated tokens/s)`` over the stages still to
    run (``done``: finished earlier, left out and counted)."""
    done = [s for s in done if s in est]
    unknown = [s for s, v in est.items() if v is None and s not in done]
    line = (f"estimated total: {minutes(total(est, done))} (calibrated: {cal.train_tokens_per_s:,.0f} train "
            f"tokens/s, {cal.gen_tokens_per_s:,.0f} generated tokens/s)")
    if done:
        line += f"; {len(done)} of {len(est)} stages already done"
    if unknown:
        line += f"; not estimated: {', '.join(unknown)}"
    return line


# ------------------------------------------------------------------------------------------ progress
class Tracker:
    """Elapsed time and time left over a plan of stages (module doc). ``estimate``: ``{stage: seconds or None}``
    in run order; ``done``: stages finished before this process started; ``clock``: seconds (tests pass
    their own)."""

    def __init__(self, estimate: dict[str, float | None], done: Iterable[str] = (),
                 clock: Callable[[], float] = time.monotonic):
        self.estimate = dict(estimate)
        self.clock = clock
        self.t0 = clock()
        self.ran: dict[str, float] = {}          # stage -> measured seconds, stages run in this process
        self.skipped: set[str] = set(done)       # finished before (resumed)
        self.current: str | None = None
        self.t_current = self.t0
        self.fraction: float | None = None       # the current stage's own progress, when it reports it

    def update(self, estimate: dict[str, float | None]) -> None:
        """New estimates for the stages that have not started (new stages are added)."""
        for k, v in estimate.items():
            if k not in self.ran and k not in self.skipped and k != self.current:
                self.estimate[k] = v

    def start(self, stage: str) -> None:
        self.estimate.setdefault(stage, None)
        self.current, self.t_current, self.fraction = stage, self.clock(), None

    def within(self, done: int, total_: int) -> None:
        """The current stage has done ``done`` of ``total_`` units (the teacher's boundaries)."""
        self.fraction = done / total_ if total_ else None

    def finish(self, stage: str, seconds: float, resumed: bool = False) -> None:
        if resumed:
            self.skipped.add(stage)
        else:
            self.ran[stage] = seconds
        if stage == self.current:
            self.current, self.fraction = None, None

    def factor(self) -> float:
        """(measured + P) / (estimated + P) over the estimated stages that ran here (module doc)."""
        est = [(self.ran[s], self.estimate[s]) for s in self.ran if self.estimate.get(s) is not None]
        prior = PRIOR_SHARE * total(self.estimate)
        m, e = sum(x for x, _ in est), sum(y for _, y in est)
        return (m + prior) / (e + prior) if e + prior > 0 else 1.0

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def left(self) -> float:
        f = self.factor()
        rest = sum(v or 0.0 for k, v in self.estimate.items()
                   if k not in self.ran and k not in self.skipped and k != self.current)
        cur = 0.0
        if self.current is not None:
            spent = self.clock() - self.t_current
            if self.fraction:
                cur = spent * (1 - self.fraction) / self.fraction
            else:
                cur = max(0.0, f * (self.estimate.get(self.current) or 0.0) - spent)
        return f * rest + cur

    def position(self) -> tuple[int, int]:
        """(number of the current or next stage, number of stages)."""
        n = len(self.estimate)
        return min(n, len(self.ran) + len(self.skipped & set(self.estimate)) + 1), n

    def line(self) -> str:
        i, n = self.position()
        nxt = next((k for k in self.estimate if k not in self.ran and k not in self.skipped), None)
        what = self.current or (f"before {nxt}" if nxt else "finishing")
        return f"[{i}/{n}] {what} | elapsed {duration(self.elapsed())} | left ~{duration(self.left())}"


class TerminalLine:
    """The tracker as one tqdm line at the top of a terminal, redrawn every ``every`` seconds by a thread;
    ``log`` prints above it (``tqdm.write``). Use as a context manager: ``on_progress`` is the callback
    :class:`hpd.demo.Demo` takes (it hands the tracker over at every stage)."""

    def __init__(self, every: float = 1.0, file: Any = None):
        import threading

        self.every, self.file = every, file
        self.tracker: Tracker | None = None
        self.bar = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "TerminalLine":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self.bar is not None:
            self._draw()
            self.bar.close()

    def log(self, line: str) -> None:
        from tqdm.auto import tqdm

        tqdm.write(line, file=self.file)

    def on_progress(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self._draw()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self._draw()

    def _draw(self) -> None:
        tr = self.tracker
        if tr is None:
            return
        from tqdm.auto import tqdm

        with self._lock:
            if self.bar is None:
                self.bar = tqdm(total=1000, desc=tr.line(), position=0, leave=True, file=self.file,
                                dynamic_ncols=True, bar_format="hpd demo {desc} |{bar:20}|")
            el, left = tr.elapsed(), tr.left()
            self.bar.n = int(1000 * el / (el + left)) if el + left > 0 else 0
            self.bar.set_description_str(tr.line(), refresh=False)
            self.bar.refresh()

