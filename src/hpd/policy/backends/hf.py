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
* ``dtype`` (``auto`` by default, :mod:`hpd.policy.dtype`): the base model's weights and compute, resolved for
  the device (``auto`` = bfloat16 on a CUDA GPU with bf16 support or a CPU with AVX512-BF16 / AMX-BF16, else
  float32); a PEFT adapter on a bfloat16 base stays float32 (peft's ``autocast_adapter_dtype``).
  ``self.dtype`` is what the model computes in.
* Prefill (``prefill="separate"``, the default): each distinct prompt of a micro-batch is prefilled on
  its own (all but its last token, no padding, so attention takes the causal fast path and the ``n``
  candidates of a prompt share one prefill); the key/value states are left-padded into one
  ``transformers.StaticCache`` sized for prompt + ``max_new_tokens``, and ``generate`` decodes all rows
  together from it (the padding is masked; positions come from the attention mask as usual). A padded
  batched prefill runs SDPA with an explicit mask (its slow path on CPU) and pads every row to the
  longest prompt (``benchmarks/rollout.py``'s ``ratio_padded_prefill`` measures the difference; figures in
  docs/experiments/2026-11-30-benchmarks.md).
  ``prefill="padded"`` keeps plain ``generate`` on the left-padded batch (for models whose cache
  layout the separate path does not support, e.g. sliding-window layers); both give the same tokens
  (a test checks it). A micro-batch holding a one-token prompt (nothing to prefill) takes the padded
  path.
* ``generate`` runs with ``do_sample=False``: the sampler's output is one-hot (0 at the chosen token,
  -inf elsewhere), so the argmax is the sampler's choice; ``generate``'s own warpers and multinomial
  (and any truncation in the model's ``generation_config.json``) never apply.
* Finished rows (``prune=True``, the default, on the separate-prefill path): hpd's own decode loop
  (:meth:`HFPolicy._decode`) stops computing a row once it has its stop token or its token limit, and
  compacts the cache to the rows still generating once a quarter of them has finished. ``generate``
  keeps every row of a micro-batch in every step until the LAST one finishes, so one candidate that
  runs to ``max_new_tokens`` made all the others pay for its length (``benchmarks/decode.py`` measures
  the difference). Same sampler, same masks and positions as ``generate``: the tokens are those of
  ``prune=False`` up to float noise from the changing batch size (tests compare them).
* Decode attention (``decode_attention="grouped"``, the default, on models loaded with ``sdpa``): a
  one-token decode step over the padded ``StaticCache`` goes through :func:`grouped_decode_attention`
  (registered as the ``hpd_sdpa`` attention implementation; every other call, prefill and training
  included, is transformers' ``sdpa`` unchanged). transformers' ``sdpa`` copies the whole cache to
  repeat the key/value heads for grouped-query attention whenever a mask is given (always, over a
  padded or static cache) and attends over all ``max_cache_len`` slots, the empty tail included (on
  SmolLM2-135M, 9 query / 3 key-value heads, that copy dominated a batched decode step:
  docs/experiments/2026-11-30-benchmarks.md). The
  grouped path views the query heads as ``(kv_heads, group)`` so the cache is read in place, and
  attends only up to the last filled slot. ``decode_attention="sdpa"`` keeps transformers' path
  (same tokens up to float noise). The setting lives on the model object: policies built over one
  shared ``model=`` share it.
* Prompt prefixes (``prefix_cache_gib``, 2 GiB by default; ``None`` or 0 turns it off): each prompt's states come
  from :class:`hpd.policy.backends.prefix_cache.PrefixCache`, which prefills block by block and keeps the blocks
  for later calls, so turn ``t + 1`` of an episode, a teacher's next attempt at a boundary and the G rollouts of
  one RL task prefill only what they add. The outputs do not depend on what is cached (every prompt is
  computed in the same blocks); a policy whose weights change must call :meth:`HFPolicy.clear_prefix_cache`.
* Stop tokens: ``<|im_end|>`` and ``<|endoftext|>`` whenever the vocabulary has them (SmolLM2's
  ``<|endoftext|>`` is also its unk and pad token, and it is a real end-of-text token there).
* Context window (``config.max_position_embeddings``, 8192 on SmolLM2): a row generates at most
  ``window - prompt length`` tokens (``finish_reason="length"`` when that cuts it, as vLLM does at
  ``max_model_len``); a prompt that fills the window is not generated at all: its ``Generation`` has
  ``finish_reason="error"`` and an ``error`` line (``Policy.act`` turns it into a Pi ``error``
  assistant message, ``hpd serve`` into an HTTP 400).
* Memory: a micro-batch holds at most ``batch_size`` rows AND at most ``cache_gib`` GiB of key/value
  cache (rows x (longest prompt + ``max_new_tokens``) x the model's bytes per cached token; always at
  least one row). SmolLM2 keeps 46 KB per token in fp32, so 32 rows of 8k-token TRAJECT prompts would
  need 12 GiB (twice that with the earlier staging buffers): the default 2 GiB splits them into
  micro-batches of ~5 rows. The prefilled states are written straight into the ``StaticCache``.
"""

from __future__ import annotations

from typing import Any, Sequence

from hpd.policy.backends.base import Generation, Policy, encode_request
from hpd.policy.backends.prefix_cache import PrefixCache
from hpd.policy.batching import budget_batches
from hpd.policy.dtype import dtype_name, resolve_dtype

STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")
DECODE_ATTENTION = "hpd_sdpa"   # the attention implementation name registered for grouped_decode_attention


def grouped_decode_attention(module, query, key, value, attention_mask, dropout: float = 0.0,
                             scaling: float | None = None, is_causal: bool | None = None, **kwargs):
    """transformers attention function: a one-token decode step with a boolean mask reads the
    key/value cache in place (query heads viewed as ``(kv_heads, group)``, no ``repeat_kv`` copy) and
    only up to the last slot any row attends to; anything else is transformers' ``sdpa`` (module doc)."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if (query.shape[2] != 1 or attention_mask is None or attention_mask.dtype != torch.bool
            or attention_mask.dim() != 4 or kwargs.get("position_bias") is not None or dropout
            or module.training or query.shape[1] % key.shape[1]):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    b, hq, _, d = query.shape
    hkv = key.shape[1]
    n = key.shape[2]
    if not torch.compiler.is_compiling():   # a data-dependent length would break a compiled decode step
        cols = attention_mask[:, 0, -1, :].any(dim=0)
        if bool(cols.any()):
            n = int(cols.nonzero()[-1]) + 1
    out = torch.nn.functional.scaled_dot_product_attention(
        query.reshape(b, hkv, hq // hkv, d), key[:, :, :n], value[:, :, :n],
        attn_mask=attention_mask[:, :, -1:, :n], scale=scaling)
    return out.reshape(b, hq, 1, value.shape[-1]).transpose(1, 2).contiguous(), None


def use_grouped_decode_attention(model: Any, grouped: bool = True) -> bool:
    """Switch a transformers model that uses ``sdpa`` to :func:`grouped_decode_attention` (registered
    once as ``hpd_sdpa``, with ``sdpa``'s masks), or back to ``sdpa`` with ``grouped=False``. The choice
    lives on the model object (policies sharing one model share it). Returns whether the model now
    uses the grouped decode attention (False for models on another attention implementation)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    impl = getattr(base.config, "_attn_implementation", None)
    if impl not in ("sdpa", DECODE_ATTENTION) or not hasattr(base, "set_attn_implementation"):
        return False
    want = DECODE_ATTENTION if grouped else "sdpa"
    if impl != want:
        AttentionInterface.register(DECODE_ATTENTION, grouped_decode_attention)
        AttentionMaskInterface.register(DECODE_ATTENTION, sdpa_mask)
        base.set_attn_implementation(want)
    return getattr(base.config, "_attn_implementation", None) == DECODE_ATTENTION


def cache_bytes_per_token(config: Any, dtype_bytes: int) -> int:
    """Key + value bytes one cached token takes over all layers (0 when the config does not say)."""
    cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers = getattr(cfg, "num_hidden_layers", None)
    heads = getattr(cfg, "num_attention_heads", None)
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or (cfg.hidden_size // heads if heads else None)
    if not (layers and kv and head_dim):
        return 0
    return int(layers) * 2 * int(kv) * int(head_dim) * int(dtype_bytes)


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

    def pick(self, scores, rows) -> tuple[Any, Any]:
        """The tokens of the rows whose next-token ``scores`` these are (``rows[i]`` = the original row of
        ``scores[i]``, which selects its generator) and their raw logprobs (None unless asked)."""
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
            picks = []
            for i, b in enumerate(rows):
                g = self.gens[b] if b < len(self.gens) else None
                picks.append(torch.multinomial(probs[i], 1, generator=g))
            choice = torch.cat(picks)
        lp = torch.log_softmax(logits, dim=-1).gather(-1, choice[:, None])[:, 0] if self.want_logprobs else None
        return choice, lp

    def __call__(self, input_ids, scores):
        choice, lp = self.pick(scores, range(scores.shape[0]))
        if lp is not None:
            self.logprobs.append(lp)
        out = self.torch.full_like(scores, float("-inf"))
        out.scatter_(-1, choice[:, None], 0.0)
        return out


def _select_rows(cache: Any, keep: Any) -> None:
    """Keep only the batch rows ``keep`` of a ``StaticCache`` (in place, layer by layer)."""
    for layer in cache.layers:
        layer.keys = layer.keys.index_select(0, keep)
        layer.values = layer.values.index_select(0, keep)
        layer.batch_size = len(keep)


class _RowLimits:
    """StoppingCriteria: row ``b`` is done once it has ``limits[b]`` new tokens (the context window)."""

    def __init__(self, prompt_len: int, limits: list[int]):
        import torch

        self.prompt_len = prompt_len
        self.limits = torch.tensor(limits, dtype=torch.long)

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        done = (input_ids.shape[1] - self.prompt_len) >= self.limits.to(input_ids.device)
        return done.to(torch.bool)


class HFPolicy(Policy):
    """``Policy`` over a local causal LM directory (optionally + a PEFT adapter directory)."""

    def __init__(self, model_dir: str, *, adapter: str | None = None, device: str | None = None,
                 dtype: str = "auto", batch_size: int = 32, model: Any = None, tokenizer: Any = None,
                 name: str | None = None, prefill: str = "separate", decode_attention: str = "grouped",
                 cache_gib: float | None = 2.0, prune: bool = True, prefix_cache_gib: float | None = 2.0,
                 prefix_block: int = 128):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.model_dir = str(model_dir)
        self.adapter = adapter
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, not {batch_size}")
        if prefill not in ("separate", "padded"):
            raise ValueError(f"prefill must be 'separate' or 'padded', not {prefill!r}")
        if decode_attention not in ("grouped", "sdpa"):
            raise ValueError(f"decode_attention must be 'grouped' or 'sdpa', not {decode_attention!r}")
        if cache_gib is not None and cache_gib <= 0:
            raise ValueError(f"cache_gib must be > 0 (or None for no limit), not {cache_gib}")
        self.prefill = prefill
        self.prune = bool(prune)
        # the decode loop's counters: rows computed per step, summed (row_steps), of which still generating
        # (live_row_steps), what generate would compute (every row until the last one finishes) and cache
        # compactions
        self.decode_stats = {"calls": 0, "row_steps": 0, "live_row_steps": 0, "generate_row_steps": 0,
                             "compactions": 0}
        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(self.model_dir)
        self.tokenizer.padding_side = "left"
        if model is None:   # dtype: auto | float32 | bfloat16, resolved for the device (hpd.policy.dtype)
            model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=resolve_dtype(dtype, self.device))
            if adapter:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, adapter)
        self.model = model.to(self.device).eval()
        self.dtype = dtype_name(next(self.model.parameters()).dtype)   # what it computes in (manifests record it)
        grouped = use_grouped_decode_attention(self.model, decode_attention == "grouped")
        self.decode_attention = "grouped" if grouped else "sdpa"
        self.name = name or (f"{self.model_dir}+{adapter}" if adapter else self.model_dir)
        vocab = self.tokenizer.get_vocab()
        self.stop_ids = [vocab[t] for t in STOP_TOKENS if t in vocab]
        if not self.stop_ids and self.tokenizer.eos_token_id is not None:
            self.stop_ids = [self.tokenizer.eos_token_id]
        if not self.stop_ids:
            raise ValueError(f"{self.model_dir}: the tokenizer has none of {', '.join(STOP_TOKENS)} and no eos token")
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.stop_ids[0]
        config = self.model.config
        text_cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
        window = getattr(text_cfg, "max_position_embeddings", None)
        self.context_window = int(window) if isinstance(window, int) and window > 0 else None
        dtype_bytes = next(self.model.parameters()).element_size()
        self.cache_bytes_per_token = cache_bytes_per_token(config, dtype_bytes)
        self.cache_budget = None if cache_gib is None else int(cache_gib * 2 ** 30)
        if prefix_cache_gib is not None and prefix_cache_gib < 0:
            raise ValueError(f"prefix_cache_gib must be >= 0 (0 or None: off), not {prefix_cache_gib}")
        self.prefix_cache = PrefixCache(prefix_block, int(prefix_cache_gib * 2 ** 30), self.cache_bytes_per_token) \
            if prefix_cache_gib else None

    def clear_prefix_cache(self) -> None:
        """Forget the cached prompt states (call it after the model's weights change)."""
        if self.prefix_cache is not None:
            self.prefix_cache.clear()

    def _prompt_states(self, ids: list[int]) -> Any:
        """The key/value states of every position of ``ids``: through the prefix cache (block by block, its
        blocks reused; :mod:`hpd.policy.backends.prefix_cache`) or one forward pass when it is off."""
        if self.prefix_cache is not None:
            return self.prefix_cache.prefill(self.model, ids, self.device)
        return self.model(input_ids=self.torch.tensor([ids], device=self.device), use_cache=True,
                          logits_to_keep=1).past_key_values

    # ------------------------------------------------------------------ generation
    def generate(self, prompts: list[str], n: int = 1, temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0, max_new_tokens: int = 256, seed: int | Sequence[int] | None = None,
                 logprobs: bool = False) -> list[list[Generation]]:
        seeds, encoded = encode_request(self.tokenizer, prompts, n, max_new_tokens, seed)
        rows = [(i, j) for i in range(len(prompts)) for j in range(n)]
        results: dict[int, Generation] = {}
        # a prompt that fills the context window is not generated (module doc)
        window = self.context_window
        for r, (i, _j) in enumerate(rows):
            if window is not None and len(encoded[i]) >= window:
                results[r] = Generation(text="", finish_reason="error", error=(
                    f"prompt is {len(encoded[i])} tokens; the model's context window is {window} "
                    f"(max_position_embeddings of {self.model_dir})"))
            elif not encoded[i]:
                results[r] = Generation(text="", finish_reason="error", error="empty prompt")
        # sort rows by prompt length so micro-batches pad little; restore order at the end
        order = sorted((r for r in range(len(rows)) if r not in results), key=lambda r: (len(encoded[rows[r][0]]), r))
        for chunk in self._chunks(order, [len(encoded[rows[r][0]]) for r in range(len(rows))], int(max_new_tokens)):
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

    def _chunks(self, order: list[int], lengths: list[int], max_new_tokens: int) -> list[list[int]]:
        """Micro-batches of rows (in ``order``, ascending length): at most ``batch_size`` rows and at most
        ``cache_gib`` of key/value cache each (at least one row): rows x the longest row's prompt + new tokens x
        bytes per token (:func:`hpd.policy.batching.budget_batches`, padded)."""
        sizes = [(lengths[r] + max_new_tokens) * self.cache_bytes_per_token for r in order]
        return [[order[k] for k in b] for b in budget_batches(sizes, self.cache_budget, padded=True,
                                                              max_rows=self.batch_size)]

    def _generate_rows(self, ids: list[list[int]], row_seeds: list[int | None], temperature: float, top_k: int,
                       top_p: float, max_new_tokens: int, want_logprobs: bool) -> list[Generation]:
        torch = self.torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        L = max(len(x) for x in ids)
        # per-row budget: the context window caps prompt + new tokens (module doc)
        limits = [max_new_tokens if self.context_window is None else min(max_new_tokens, self.context_window - len(x))
                  for x in ids]
        steps = max(limits)
        input_ids = torch.full((len(ids), L), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), L), dtype=torch.long)
        for b, x in enumerate(ids):
            input_ids[b, L - len(x):] = torch.tensor(x, dtype=torch.long)
            mask[b, L - len(x):] = 1
        sampler = _RowSampler(row_seeds, temperature, top_k, top_p, want_logprobs)
        if self.prune and self.prefill == "separate" and min(len(x) for x in ids) >= 2:
            with torch.no_grad():
                toks, lps = self._decode(ids, L, limits, steps, sampler)
            return [self._generation(ids[b], toks[b], lps[b] if want_logprobs else None, limits[b])
                    for b in range(len(ids))]
        with torch.no_grad():
            extra: dict = {}
            if min(limits) < steps:
                extra["stopping_criteria"] = StoppingCriteriaList([_RowLimits(L, limits)])
            if self.prefill == "separate" and min(len(x) for x in ids) >= 2:
                extra["past_key_values"] = self._prefilled_cache(ids, L, steps)
            out = self.model.generate(
                input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                do_sample=False, temperature=None, top_k=None, top_p=None, num_beams=1,
                max_new_tokens=steps, eos_token_id=self.stop_ids, pad_token_id=self.pad_id,
                logits_processor=LogitsProcessorList([sampler]), use_cache=True, **extra,
            )
        new = out[:, L:].cpu()
        lps = torch.stack(sampler.logprobs, dim=1).cpu() if want_logprobs and sampler.logprobs else None
        return [self._generation(ids[b], new[b].tolist(), lps[b].tolist() if lps is not None else None, limits[b])
                for b in range(new.shape[0])]

    def _generation(self, prompt: list[int], toks: list[int], lps: list[float] | None, limit: int) -> Generation:
        """One row's ``Generation``: its new tokens up to and including the first stop token (finish
        ``stop``), else up to its limit (finish ``length``)."""
        toks = toks[:limit]
        stop_at = next((k for k, t in enumerate(toks) if t in self.stop_ids), None)
        if stop_at is None:
            kept, finish, body = toks, "length", toks
        else:
            kept, finish, body = toks[: stop_at + 1], "stop", toks[:stop_at]
        text = self.tokenizer.decode(body, skip_special_tokens=False)
        return Generation(text=text, token_ids=kept, logprobs=lps[: len(kept)] if lps is not None else None,
                          finish_reason=finish, prompt_token_ids=list(prompt))

    def _decode(self, ids: list[list[int]], L: int, limits: list[int], steps: int, sampler: "_RowSampler"):
        """The decode loop of the separate-prefill path (module doc, "Finished rows"): one token per active
        row per step over the prefilled ``StaticCache``; a row leaves at its stop token or its limit, and
        the cache and masks are compacted to the active rows once a quarter of them has left. Returns each
        row's new tokens and raw logprobs."""
        torch = self.torch
        B = len(ids)
        cache = self._prefilled_cache(ids, L, steps)
        mask = torch.zeros((B, L + steps), dtype=torch.long, device=self.device)
        for b, x in enumerate(ids):
            mask[b, L - len(x):L] = 1
        cur = torch.tensor([x[-1] for x in ids], device=self.device)
        pos = torch.tensor([len(x) - 1 for x in ids], device=self.device)
        rows = list(range(B))                  # original row of each cache row
        live = torch.ones(B, dtype=torch.bool)  # cache rows still generating
        toks: list[list[int]] = [[] for _ in range(B)]
        lps: list[list[float]] = [[] for _ in range(B)]
        stops = set(self.stop_ids)
        self.decode_stats["calls"] += 1
        for t in range(steps):
            slot = L - 1 + t
            logits = self.model(input_ids=cur[:, None], attention_mask=mask[:, :slot + 1], position_ids=pos[:, None],
                                past_key_values=cache, cache_position=torch.tensor([slot], device=self.device),
                                use_cache=True, logits_to_keep=1).logits[:, -1]
            idx = live.nonzero()[:, 0]
            self.decode_stats["row_steps"] += len(rows)
            self.decode_stats["live_row_steps"] += len(idx)
            choice, lp = sampler.pick(logits[idx], [rows[i] for i in idx.tolist()])
            nxt = torch.full_like(cur, self.pad_id)
            nxt[idx] = choice.to(cur.device)
            for i, tok, p in zip(idx.tolist(), choice.tolist(), lp.tolist() if lp is not None else [None] * len(idx)):
                r = rows[i]
                toks[r].append(tok)
                if p is not None:
                    lps[r].append(p)
                if tok in stops or len(toks[r]) >= limits[r]:
                    live[i] = False
            if not bool(live.any()):
                break
            mask[:, slot + 1] = live.to(mask.dtype)
            cur, pos = nxt, pos + 1
            if int(live.sum()) <= 3 * len(rows) // 4:
                keep = live.nonzero()[:, 0]
                _select_rows(cache, keep)
                mask, cur, pos = mask[keep], cur[keep], pos[keep]
                rows = [rows[i] for i in keep.tolist()]
                live = torch.ones(len(rows), dtype=torch.bool)
                self.decode_stats["compactions"] += 1
        self.decode_stats["generate_row_steps"] += B * (t + 1)   # what generate computes: every row, every step
        return toks, lps

    def _prefilled_cache(self, ids: list[list[int]], L: int, max_new_tokens: int) -> Any:
        """A ``StaticCache`` holding every row's prompt minus its last token, left-padded to ``L - 1``
        (see module doc). Rows with the same prompt (the ``n`` candidates) share one prefill; each
        prompt's states are written into the cache's own buffers as soon as it is prefilled, so at most
        one prompt's own cache is alive besides them."""
        torch = self.torch
        from transformers import StaticCache

        rows_of: dict[tuple[int, ...], list[int]] = {}
        for b, x in enumerate(ids):
            rows_of.setdefault(tuple(x), []).append(b)
        cache = StaticCache(config=self.model.config, max_cache_len=L + max_new_tokens)
        if any(getattr(layer, "is_sliding", False) for layer in cache.layers):
            raise ValueError(f"{self.model_dir} has sliding-window layers: use HFPolicy(prefill='padded')")
        for key, rows in rows_of.items():
            states = self._prompt_states(list(key[:-1]))
            for layer, src in zip(cache.layers, states.layers):
                if not layer.is_initialized:
                    k, v = src.keys, src.values
                    layer.lazy_initialization(k.new_zeros((len(ids), *k.shape[1:])),
                                              v.new_zeros((len(ids), *v.shape[1:])))
                for b in rows:
                    layer.keys[b, :, L - len(key):L - 1] = src.keys[0]
                    layer.values[b, :, L - len(key):L - 1] = src.values[0]
            del states
        for layer in cache.layers:
            layer.cumulative_length.fill_(L - 1)
        return cache
