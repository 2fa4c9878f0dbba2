"""transformers backend: batched ``model.generate`` over a left-padded KV cache.

* All prompts of a call (each repeated ``n`` times, one row per candidate) go through ``generate`` in
  micro-batches of ``batch_size`` rows (prompts sorted by length to limit padding).
* Full-vocabulary sampling: the request's ``top_k=0, top_p=1.0`` are applied (as no truncation) by our
  sampler, and a model's ``generation_config.json`` truncation never applies (see ``do_sample`` below).
* Sampling is done by :class:`_RowSampler`, a logits processor that draws each row's token with that
  row's own ``torch.Generator`` (seeded from the prompt's seed and the candidate index) and masks
  every other token. This gives per-prompt reproducibility independent of the rest of the batch (up
  to float noise from padding), which ``generate``'s one global RNG cannot. ``temperature=0`` is
  greedy (argmax) through the same path. ``top_k``/``top_p`` other than 0/1.0 are applied inside the
  sampler too.
* Logprobs (``logprobs=True``): log-softmax of the raw logits at the sampled token (temperature 1, no
  truncation), like vLLM's default ``raw_logprobs``.
* A PEFT adapter directory (``adapter=``) is loaded on top of the base with ``PeftModel.from_pretrained``.
* Prefill (``prefill="separate"``, the default): each distinct prompt of a micro-batch is prefilled on
  its own (all but its last token, no padding, so attention takes the causal fast path and the ``n``
  candidates of a prompt share one prefill); the key/value states are left-padded into one
  ``transformers.StaticCache`` sized for prompt + ``max_new_tokens``, and ``generate`` decodes all rows
  together from it (the padding is masked; positions come from the attention mask as usual). A padded
  batched prefill runs SDPA with an explicit mask (its slow path on CPU) and pads every row to the
  longest prompt; with 1.4-2.3k-token agent contexts on the tiny model, batched episodes ran at about
  half the speed they reach with separate prefills (``benchmarks/rollout.py``, ``ratio_padded_prefill``).
  ``prefill="padded"`` keeps plain ``generate`` on the left-padded batch (for models whose cache
  layout the separate path does not support, e.g. sliding-window layers); both give the same tokens
  (a test checks it). A micro-batch holding a one-token prompt (nothing to prefill) takes the padded
  path.
* ``generate`` runs with ``do_sample=False``: the sampler's output is one-hot (0 at the chosen token,
  -inf elsewhere), so the argmax is the sampler's choice; ``generate``'s own warpers and multinomial
  (and any truncation in the model's ``generation_config.json``) never apply.
"""

from __future__ import annotations

from typing import Any, Sequence

from hpd.policy.backends.base import Generation, Policy, seeds_for

STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")


class _RowSampler:
    """LogitsProcessor: per-row seeded sampling (see module doc); records raw logprobs when asked."""

    def __init__(self, row_seeds: list[int | None], temperature: float, top_k: int, top_p: float,
                 want_logprobs: bool):
        import torch

        self.torch = torch
        self.gens = [None if s is None else torch.Generator().manual_seed(int(s) & 0x7FFFFFFFFFFFFFFF)
                     for s in row_seeds]
        self.temperature = float(temperature)
        self.top_k = int(top_k or 0)
        self.top_p = float(top_p if top_p is not None else 1.0)
        self.want_logprobs = want_logprobs
        self.logprobs: list[Any] = []  # per step: (B,) tensor

    def __call__(self, input_ids, scores):
        torch = self.torch
        logits = scores.float()
        if self.temperature <= 0:
            choice = logits.argmax(dim=-1)
        else:
            z = logits / self.temperature
            if self.top_k > 0 and self.top_k < z.shape[-1]:
                kth = torch.topk(z, self.top_k, dim=-1).values[..., -1:]
                z = z.masked_fill(z < kth, float("-inf"))
            if self.top_p < 1.0:
                sz, si = torch.sort(z, descending=True, dim=-1)
                cum = torch.softmax(sz, dim=-1).cumsum(dim=-1)
                drop = cum - torch.softmax(sz, dim=-1) > self.top_p
                sz = sz.masked_fill(drop, float("-inf"))
                z = torch.full_like(z, float("-inf")).scatter(-1, si, sz)
            probs = torch.softmax(z, dim=-1)
            rows = []
            for b in range(probs.shape[0]):
                g = self.gens[b] if b < len(self.gens) else None
                rows.append(torch.multinomial(probs[b], 1, generator=g))
            choice = torch.cat(rows)
        if self.want_logprobs:
            lp = torch.log_softmax(logits, dim=-1).gather(-1, choice[:, None])[:, 0]
            self.logprobs.append(lp)
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(-1, choice[:, None], 0.0)
        return out


class HFPolicy(Policy):
    """``Policy`` over a local causal LM directory (optionally + a PEFT adapter directory)."""

    def __init__(self, model_dir: str, *, adapter: str | None = None, device: str | None = None,
                 dtype: str = "float32", batch_size: int = 32, model: Any = None, tokenizer: Any = None,
                 name: str | None = None, prefill: str = "separate"):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.model_dir = str(model_dir)
        self.adapter = adapter
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.batch_size = int(batch_size)
        if prefill not in ("separate", "padded"):
            raise ValueError(f"prefill must be 'separate' or 'padded', not {prefill!r}")
        self.prefill = prefill
        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(self.model_dir)
        self.tokenizer.padding_side = "left"
        if model is None:
            model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=getattr(torch, dtype))
            if adapter:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, adapter)
        self.model = model.to(self.device).eval()
        self.name = name or (f"{self.model_dir}+{adapter}" if adapter else self.model_dir)
        self.stop_ids = [i for i in (self.tokenizer.convert_tokens_to_ids(t) for t in STOP_TOKENS)
                         if isinstance(i, int) and i >= 0 and i != self.tokenizer.unk_token_id]
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.stop_ids[0]

    # ------------------------------------------------------------------ generation
    def generate(self, prompts: list[str], n: int = 1, temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0, max_new_tokens: int = 256, seed: int | Sequence[int] | None = None,
                 logprobs: bool = False) -> list[list[Generation]]:
        if n < 1:
            raise ValueError("n must be >= 1")
        seeds = seeds_for(seed, len(prompts))
        encoded = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        rows = [(i, j) for i in range(len(prompts)) for j in range(n)]
        # sort rows by prompt length so micro-batches pad little; restore order at the end
        order = sorted(range(len(rows)), key=lambda r: (len(encoded[rows[r][0]]), r))
        results: dict[int, Generation] = {}
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            batch_rows = [rows[r] for r in chunk]
            row_seeds = [None if seeds[i] is None else seeds[i] * 1_000_003 + j for i, j in batch_rows]
            gens = self._generate_rows([encoded[i] for i, _ in batch_rows], row_seeds, temperature, top_k,
                                       top_p, max_new_tokens, logprobs)
            for r, g in zip(chunk, gens):
                results[r] = g
        out: list[list[Generation]] = [[] for _ in prompts]
        for r, (i, _j) in enumerate(rows):
            out[i].append(results[r])
        return out

    def _generate_rows(self, ids: list[list[int]], row_seeds: list[int | None], temperature: float, top_k: int,
                       top_p: float, max_new_tokens: int, want_logprobs: bool) -> list[Generation]:
        torch = self.torch
        from transformers import LogitsProcessorList

        L = max(len(x) for x in ids)
        input_ids = torch.full((len(ids), L), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), L), dtype=torch.long)
        for b, x in enumerate(ids):
            if x:
                input_ids[b, L - len(x):] = torch.tensor(x, dtype=torch.long)
                mask[b, L - len(x):] = 1
        sampler = _RowSampler(row_seeds, temperature, top_k, top_p, want_logprobs)
        with torch.no_grad():
            extra = {}
            if self.prefill == "separate" and min(len(x) for x in ids) >= 2:
                extra["past_key_values"] = self._prefilled_cache(ids, L, int(max_new_tokens))
            out = self.model.generate(
                input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                do_sample=False, temperature=None, top_k=None, top_p=None, num_beams=1,
                max_new_tokens=int(max_new_tokens), eos_token_id=self.stop_ids, pad_token_id=self.pad_id,
                logits_processor=LogitsProcessorList([sampler]), use_cache=True, **extra,
            )
        new = out[:, L:].cpu()
        lps = torch.stack(sampler.logprobs, dim=1).cpu() if want_logprobs and sampler.logprobs else None
        gens = []
        for b in range(new.shape[0]):
            toks = new[b].tolist()
            stop_at = next((k for k, t in enumerate(toks) if t in self.stop_ids), None)
            if stop_at is None:
                kept, finish, body = toks, "length", toks
            else:
                kept, finish, body = toks[: stop_at + 1], "stop", toks[:stop_at]
            text = self.tokenizer.decode(body, skip_special_tokens=False)
            lp = lps[b, : len(kept)].tolist() if lps is not None else None
            gens.append(Generation(text=text, token_ids=kept, logprobs=lp, finish_reason=finish))
        return gens

    def _prefilled_cache(self, ids: list[list[int]], L: int, max_new_tokens: int) -> Any:
        """A ``StaticCache`` holding every row's prompt minus its last token, left-padded to ``L - 1``
        (see module doc). Rows with the same prompt (the ``n`` candidates) share one prefill; each
        prompt's states are copied into the padded buffers as soon as it is prefilled, so at most one
        prompt's own cache is alive besides them."""
        torch = self.torch
        from transformers import StaticCache

        rows_of: dict[tuple[int, ...], list[int]] = {}
        for b, x in enumerate(ids):
            rows_of.setdefault(tuple(x), []).append(b)
        bufs: list[tuple[Any, Any]] = []
        for key, rows in rows_of.items():
            states = self.model(input_ids=torch.tensor([key[:-1]], device=self.device), use_cache=True,
                                logits_to_keep=1).past_key_values
            for li, layer in enumerate(states.layers):
                if li == len(bufs):
                    k, v = layer.keys, layer.values
                    bufs.append((k.new_zeros((len(ids), k.shape[1], L - 1, k.shape[3])),
                                 v.new_zeros((len(ids), v.shape[1], L - 1, v.shape[3]))))
                K, V = bufs[li]
                for b in rows:
                    K[b, :, L - len(key):] = layer.keys[0]
                    V[b, :, L - len(key):] = layer.values[0]
            del states
        cache = StaticCache(config=self.model.config, max_cache_len=L + max_new_tokens)
        for li, (K, V) in enumerate(bufs):
            cache.layers[li].update(K, V)
        return cache
