"""The batching engine behind ``hpd serve``: concurrent requests share one ``policy.generate`` call.

One engine thread owns the policy. Request threads :meth:`BatchEngine.generate` (blocking) and the
engine takes, in arrival order, the oldest queued request plus every other queued request with the same
sampling settings (``n``, ``max_new_tokens``, ``temperature``, ``top_p``, ``top_k``, ``logprobs``; seeds may
differ), up to ``max_batch`` rows (prompts x ``n``), and runs them as ONE ``generate`` call: the hf backend
decodes them together over one padded cache, vLLM schedules them together. Requests with other settings
wait for the next call (they are then the oldest, so nothing starves).

Gathering: while a batch runs, new requests queue up and form the next batch. Before taking a batch the
engine waits (while requests keep arriving, each within ``max_wait_s`` (default 50 ms) of the previous
one, and at most 10 x ``max_wait_s`` from the later of the oldest request's arrival and the end of the
last batch) until the queue holds as many rows as were active at the end of the last batch
(the rows it just answered plus those queued then: clients that were just answered usually send their
next request at once) and no arrived request is still being checked and rendered
(:meth:`BatchEngine.preparing`). Without that wait, 32 clients split into two halves that alternate
forever (each half queues while the other one runs); with it they converge to one batch. A lone client
loses nothing: its next request fills the expected row count as soon as it arrives.

Seeds: a lone request is passed to the policy exactly as it came (its ``seed`` int as is); in a batch each
request's ``seed`` becomes its prompts' entries of a per-prompt seed list (``seeds_for(seed, k)``, the same
seeds the policy derives for a lone call), so a seeded request gets the same tokens batched or alone (up
to float noise from padding, :mod:`hpd.policy.backends.hf`).

Errors: if a batched call raises, each request of it is retried on its own, so only a request that fails
by itself gets the exception.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from hpd.policy.backends.base import Generation, Policy, seeds_for


@dataclass
class _Job:
    prompts: list[str]
    sampling: dict
    future: Future = field(default_factory=Future)
    arrived: float = field(default_factory=time.monotonic)

    @property
    def rows(self) -> int:
        return len(self.prompts) * int(self.sampling.get("n", 1))

    @property
    def key(self) -> tuple:
        return tuple(sorted((k, v) for k, v in self.sampling.items() if k != "seed"))


class BatchEngine:
    """See module doc. ``batches`` keeps the row count of the last 1024 ``generate`` calls."""

    def __init__(self, policy: Policy, *, max_batch: int = 64, max_wait_s: float = 0.05):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, not {max_batch}")
        self.policy = policy
        self.max_batch = int(max_batch)
        self.max_wait_s = float(max_wait_s)
        self.batches: deque[int] = deque(maxlen=1024)
        self._jobs: deque[_Job] = deque()
        self._preparing = 0
        self._expect = 0        # rows the engine waits for before a batch (module doc)
        self._finished = 0.0    # when the last batch finished
        self._last_arrival = 0.0  # when the last request arrived or began to be prepared
        self._cv = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None   # started by the first request

    # ------------------------------------------------------------------ request side
    @contextmanager
    def preparing(self) -> Iterator[None]:
        """Wrap the checking/rendering of a request that will call :meth:`generate` (module doc)."""
        with self._cv:
            self._preparing += 1
            self._last_arrival = time.monotonic()
        try:
            yield
        finally:
            with self._cv:
                self._preparing -= 1
                self._cv.notify_all()

    def generate(self, prompts: list[str], sampling: dict) -> list[list[Generation]]:
        """``policy.generate(prompts, **sampling)``, batched with other requests; blocks until done."""
        job = _Job(list(prompts), dict(sampling))
        with self._cv:
            if self._closed:
                raise RuntimeError("the serving engine is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="hpd-serve-engine", daemon=True)
                self._thread.start()
            self._jobs.append(job)
            self._last_arrival = job.arrived
            self._cv.notify_all()
        return job.future.result()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=30)

    # ------------------------------------------------------------------ engine thread
    def _loop(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            self._run(batch)
            with self._cv:   # the clients just answered usually come back: expect them (module doc)
                self._expect = min(self.max_batch, sum(j.rows for j in batch) + sum(j.rows for j in self._jobs))
                self._finished = time.monotonic()

    def _take(self) -> list[_Job] | None:
        with self._cv:
            self._cv.wait_for(lambda: self._jobs or self._closed)
            if not self._jobs:
                return None
            start = max(self._jobs[0].arrived, self._finished)
            while True:
                rows = sum(j.rows for j in self._jobs)
                # wait while requests keep coming (each within max_wait_s of the last), 10 x max_wait_s at most
                deadline = min(max(start, self._last_arrival) + self.max_wait_s, start + 10 * self.max_wait_s)
                if rows >= self.max_batch or (rows >= self._expect and not self._preparing) \
                        or time.monotonic() >= deadline:
                    break
                self._cv.wait(timeout=max(0.0, deadline - time.monotonic()))
            key = self._jobs[0].key
            batch: list[_Job] = []
            rest: deque[_Job] = deque()
            rows = 0
            for job in self._jobs:
                if job.key == key and (not batch or rows + job.rows <= self.max_batch):
                    batch.append(job)
                    rows += job.rows
                else:
                    rest.append(job)
            self._jobs = rest
            return batch

    def _run(self, batch: list[_Job]) -> None:
        if len(batch) == 1:
            job = batch[0]
            try:
                job.future.set_result(self.policy.generate(job.prompts, **job.sampling))
                self.batches.append(job.rows)
            except Exception as exc:  # handed to the request thread
                job.future.set_exception(exc)
            return
        prompts = [p for job in batch for p in job.prompts]
        seeds = [s for job in batch for s in seeds_for(job.sampling.get("seed"), len(job.prompts))]
        shared = {k: v for k, v in batch[0].sampling.items() if k != "seed"}
        try:
            gens = self.policy.generate(prompts, seed=seeds if any(s is not None for s in seeds) else None, **shared)
        except Exception:
            for job in batch:
                self._run([job])
            return
        self.batches.append(sum(job.rows for job in batch))
        k = 0
        for job in batch:
            job.future.set_result(gens[k:k + len(job.prompts)])
            k += len(job.prompts)

    def stats(self) -> dict[str, Any]:
        """Queue length and the recent batch sizes (for ``/health``)."""
        with self._cv:
            queued = len(self._jobs)
        sizes = list(self.batches)
        return {"queued": queued, "batches": len(sizes),
                "mean_batch_rows": round(sum(sizes) / len(sizes), 2) if sizes else 0.0}
