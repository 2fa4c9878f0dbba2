"""Real token lengths of the T, I and R rows over TRAJECT-Bench boundaries (``hpd data stats --tokenizer``).

What is measured: every selected task's reference trajectory is replayed through the harness exactly as
``hpd replay`` does (:func:`hpd.boundary.replay_task` with the default :class:`~hpd.boundary.ReplayConfig`:
the paper's tool pool of ``pool_k=20`` tools per episode, gold + seeded distractors), the control document
is compiled at one privilege level (default ``plan``, the level ``hpd teach`` hands on to the training
records), and each boundary becomes three rows rendered by THE renderer (:class:`hpd.views.Renderer`
over ``hpd.policy.chat``), exactly as :mod:`hpd.views.build` renders them:

* **T**  prompt = ``prompt(context)``,                       target = ``action(reference)``
* **I**  prompt = ``prompt(context, document=doc)``,         target = ``action(reference)``
* **R**  prompt = ``prompt(context + [instruction])``,       target = ``text_completion(doc)``

Targets of T and I are the *reference* actions: teacher targets do not exist before ``hpd teach`` and have
the same form (a tool-call turn or a final answer). Lengths are the UNTRIMMED ones -- what each row needs;
the length policy of :mod:`hpd.views.length_policy` (omitting old tool outputs) is not applied. A row *fits* a
``max_length`` when ``prompt + target <= max_length`` (the test of :func:`hpd.views.build._fit`).

Percentiles are nearest-rank (``p``-th percentile = the ``ceil(p/100 * n)``-th smallest value), so every
reported figure is the length of a real row.

Speed (exactness is kept): a prompt is ~25k characters and 3 x ~18.9k of them are rendered, so caches
make the full run take minutes instead of most of an hour on two CPU cores:

* the template-ready tool list (``template_tools``, a JavaScript-exact JSON round trip, the slowest part
  of ``render_prompt``) is computed once per distinct tool list, and the T and I prompts of a boundary
  share one Pi -> OpenAI conversion (:class:`CachedRenderer`);
* token counts are summed over pieces (:class:`TokenCounter`). A Hugging Face fast tokenizer splits its
  input on added tokens (``<|im_start|>``, ``<tool_call>``, ...) *before* normalising and pre-tokenising,
  so the pieces between them are tokenized independently (for tokenizers whose added tokens are plain:
  no ``lstrip``/``rstrip``/``single_word``, not normalised). With Qwen2/Qwen3's pre-tokenizer no
  pre-token holds a newline followed by a non-space character, so pieces are also cut there (lines).
  Pieces repeat across the boundaries of one episode and across episodes (system prompt, tool schemas,
  earlier messages, document lines), so most are tokenized once. Other tokenizers: every text whole.

Both shortcuts are checked while running: the first row of each view and every ``verify_every``-th row
after it is also rendered with the plain :class:`~hpd.views.Renderer` and encoded with
``Renderer.encode`` (``encode_example``, what training uses); any difference stops the run
(:class:`LengthMismatch`). The report records how many rows were checked this way.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from .examples import VIEWS
from .render import Renderer

DEFAULT_PRIVILEGE = "plan"   # what `hpd teach --privilege` defaults to, hence what the I/R training rows carry
STAT_KEYS = ("p50", "p95", "p99", "max", "mean")


class TokenizerError(ValueError):
    """A tokenizer folder that is missing or cannot be loaded (one line)."""


class LengthMismatch(RuntimeError):
    """The fast counting path disagreed with ``Renderer.encode`` on a checked row."""


# --------------------------------------------------------------------------- tokenizer


def load_tokenizer_dir(path: str | Path):
    """A Hugging Face tokenizer from a local folder, or :class:`TokenizerError` with one line saying why."""
    p = Path(path).expanduser()
    if not p.exists():
        raise TokenizerError(f"tokenizer folder not found: {p}")
    if not p.is_dir():
        raise TokenizerError(f"--tokenizer must be a folder (e.g. from `hpd model qwen3-tokenizer --out DIR`), "
                             f"not a file: {p}")
    if not any((p / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")):
        raise TokenizerError(f"no tokenizer files (tokenizer.json / tokenizer_config.json) in {p}; "
                             "build one with `hpd model qwen3-tokenizer --out DIR`")
    try:
        import os

        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
    except Exception as e:  # noqa: BLE001 - any failure is one line for the user
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise TokenizerError(f"cannot load a tokenizer from {p}: {first}") from None
    if not callable(tok):
        raise TokenizerError(f"{p} did not load as a tokenizer")
    return tok


def tokenizer_info(tokenizer, path: str | Path | None = None) -> dict:
    """``{"name", "path", "class", "vocab"}``; the name comes from hpd's own manifest when the folder has one."""
    name = None
    if path is not None:
        for f in ("hpd_tokenizer.json", "manifest.json"):
            try:
                obj = json.loads((Path(path) / f).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            cfg = obj.get("hpd_tokenizer") or obj.get("config") or {}
            if isinstance(cfg, dict) and (cfg.get("package") or cfg.get("name")):
                name = f"{cfg.get('name', '')} ({cfg['package']})" if cfg.get("package") else cfg["name"]
                break
    if name is None:
        name = Path(str(getattr(tokenizer, "name_or_path", "") or path or "tokenizer")).name
    return {"name": name, "path": str(Path(path).resolve()) if path is not None else None,
            "class": type(tokenizer).__name__, "vocab": len(tokenizer)}


#: The Qwen2/Qwen3 pre-tokenizer pattern (tokenizer.json ``pre_tokenizer`` Split regex). With it no
#: pre-token holds a newline followed by a non-space character, so a text can also be cut after every
#: newline that precedes a non-space character (see :class:`TokenCounter`).
QWEN2_SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                     r"\s*[\r\n]+|\s+(?!\S)|\s+")


def _component_json(tokenizer, part: str) -> dict | None:
    """The JSON of the backend tokenizer's ``normalizer`` / ``pre_tokenizer`` (``None`` if absent)."""
    comp = getattr(getattr(tokenizer, "backend_tokenizer", None), part, None)
    if comp is None:
        return None
    try:
        return json.loads(comp.__getstate__())
    except Exception:  # noqa: BLE001 - unknown component: treated as unusual
        return {"type": "?"}


def _segment_safe(tokenizer) -> bool:
    """True when the tokenizer splits its input on added tokens plainly (see module doc)."""
    if not getattr(tokenizer, "is_fast", False) or not getattr(tokenizer, "added_tokens_decoder", None):
        return False
    has_normalizer = _component_json(tokenizer, "normalizer") is not None
    for t in tokenizer.added_tokens_decoder.values():
        if getattr(t, "lstrip", False) or getattr(t, "rstrip", False) or getattr(t, "single_word", False):
            return False
        if has_normalizer and getattr(t, "normalized", False):
            return False
    return True


def _line_safe(tokenizer) -> bool:
    """True for a byte-level BPE with Qwen2's pre-tokenizer and no normaliser other than NFC: then no
    pre-token spans a newline followed by a non-space character, so the text can be cut there."""
    if _component_json(tokenizer, "normalizer") not in (None, {"type": "NFC"}):
        return False
    model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
    pre = _component_json(tokenizer, "pre_tokenizer") or {}
    seq = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    if not seq or len(seq) != 2:
        return False
    split, byte = seq
    return (split.get("type") == "Split" and (split.get("pattern") or {}).get("Regex") == QWEN2_SPLIT_REGEX
            and split.get("behavior") == "Isolated" and not split.get("invert")
            and byte.get("type") == "ByteLevel" and not byte.get("add_prefix_space") and not byte.get("use_regex")
            and type(model).__name__ == "BPE")


_LINE_CUT = re.compile(r"(?<=\n)(?=\S)")


class TokenCounter:
    """Exact token counts of rendered text, the count ``encode_example`` gives (see module doc).

    ``mode``:

    * ``"lines"``: the text is cut on added tokens (each counts 1) and after every newline that precedes a
      non-space character (Qwen2/Qwen3 pre-tokenizer only, :func:`_line_safe`); the pieces' counts are
      cached, so the tool list, earlier messages and most document lines are tokenized once;
    * ``"segments"``: cut on added tokens only (other fast tokenizers with plain added tokens);
    * ``"whole"``: every text encoded whole (``exact=True``, or a tokenizer where neither cut is safe).

    The cache holds at most ``max_cache`` pieces (emptied by :meth:`trim` when over).
    """

    def __init__(self, tokenizer, *, exact: bool = False, max_cache: int = 200_000) -> None:
        self.tokenizer = tokenizer
        self.max_cache = max_cache
        if exact or not _segment_safe(tokenizer):
            self.mode = "whole"
        else:
            self.mode = "lines" if _line_safe(tokenizer) else "segments"
        self._cache: dict[str, int] = {}
        if self.mode != "whole":
            added = sorted({t.content for t in tokenizer.added_tokens_decoder.values()}, key=len, reverse=True)
            self._added = frozenset(added)
            self._split = re.compile("(" + "|".join(re.escape(a) for a in added) + ")")

    def _encode_len(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _piece(self, piece: str) -> int:
        c = self._cache.get(piece)
        if c is None:
            c = self._cache[piece] = self._encode_len(piece)
        return c

    def count(self, text: str) -> int:
        if self.mode == "whole":
            return self._encode_len(text)
        n = 0
        lines = self.mode == "lines"
        for part in self._split.split(text):
            if not part:
                continue
            if part in self._added:
                n += 1
            elif lines and "\n" in part:
                n += sum(self._piece(p) for p in _LINE_CUT.split(part))
            else:
                n += self._piece(part)
        return n

    def trim(self) -> None:
        """Empty the cache if it holds more than ``max_cache`` pieces."""
        if len(self._cache) > self.max_cache:
            self._cache.clear()


class CachedRenderer(Renderer):
    """:class:`Renderer` whose ``prompt`` reuses the template-ready tool list while the tools do not change,
    and the Pi -> OpenAI conversion of the last context (the T and I prompts of one boundary).

    The composition is ``render_prompt``'s own (``pi_to_openai`` -> ``inject_document`` ->
    ``template_messages`` -> ``render_messages``); the measuring loop checks it against the plain
    :class:`Renderer` (see module doc). With a renderer module that lacks these pieces it is the plain one.
    """

    _PIECES = ("pi_to_openai", "inject_document", "template_messages", "template_tools", "render_messages")

    def __init__(self, tokenizer: Any, **kw) -> None:
        super().__init__(tokenizer, **kw)
        self._fast = all(hasattr(self.module, f) for f in self._PIECES)
        self._tools_key: str | None = None
        self._tools_val: Any = None
        self._oai: tuple[Any, Any] = (None, None)   # (context object, its pi_to_openai messages)

    def _tools(self, tools) -> Any:
        key = json.dumps(tools, ensure_ascii=False, default=str)
        if key != self._tools_key:
            self._tools_key, self._tools_val = key, self.module.template_tools(tools)
        return self._tools_val

    def prompt(self, ctx: dict, document: str | None = None) -> str:
        if not self._fast:
            return super().prompt(ctx, document=document)
        m = self.module
        if self._oai[0] is not ctx:   # T and I of one boundary share the conversion (it does not mutate)
            self._oai = (ctx, m.pi_to_openai(ctx))
        oai = self._oai[1]
        if document is not None:
            oai = m.inject_document(oai, document)
        return m.render_messages(self.tokenizer, m.template_messages(oai), self._tools(ctx.get("tools")),
                                 enable_thinking=self.enable_thinking)


# --------------------------------------------------------------------------- rows


def view_texts(renderer: Renderer, context: dict, action: dict | None,
               document: str | None) -> dict[str, tuple[str, str]]:
    """``{view: (prompt text, completion text)}`` of one boundary, as :mod:`hpd.views.build` renders them
    (untrimmed). A view whose input is missing (no action for T/I, no document for I/R) is left out."""
    out: dict[str, tuple[str, str]] = {}
    act = renderer.action(action) if action is not None else None
    if act is not None:
        out["T"] = (renderer.prompt(context), act)
        if document is not None:
            out["I"] = (renderer.prompt(context, document=document), act)
    if document is not None:
        out["R"] = (renderer.prompt(renderer.r_context(context)), renderer.text_completion(document))
    return out


def row_lengths(renderer: Renderer, context: dict, action: dict | None,
                document: str | None) -> dict[str, tuple[int, int]]:
    """``{view: (prompt tokens, completion tokens)}`` through ``Renderer.encode`` (the slow, reference path)."""
    out = {}
    for v, (p, c) in view_texts(renderer, context, action, document).items():
        pi, ci = renderer.encode(p, c)
        out[v] = (len(pi), len(ci))
    return out


def percentile(values: Sequence[int], p: float) -> int | None:
    """Nearest-rank percentile of ``values`` (``None`` if empty)."""
    if not values:
        return None
    s = sorted(values)
    k = max(1, math.ceil(p / 100.0 * len(s)))
    return s[min(k, len(s)) - 1]


def summarize(values: Sequence[int]) -> dict:
    """``{"p50", "p95", "p99", "max", "mean"}`` of a list of lengths (``None`` each when empty)."""
    if not values:
        return {k: None for k in STAT_KEYS}
    return {"p50": percentile(values, 50), "p95": percentile(values, 95), "p99": percentile(values, 99),
            "max": max(values), "mean": round(sum(values) / len(values), 1)}


def fits_shares(totals: Sequence[int], max_lengths: Iterable[int]) -> dict[str, float | None]:
    """``{str(max_length): share of totals <= max_length}`` (rounded to 6 places)."""
    n = len(totals)
    return {str(m): (round(sum(1 for t in totals if t <= m) / n, 6) if n else None) for m in sorted(set(max_lengths))}


class LengthCollector:
    """Accumulates per-view prompt/target lengths and summarises them (the report's ``views`` part)."""

    def __init__(self) -> None:
        self.prompt: dict[str, list[int]] = {v: [] for v in VIEWS}
        self.target: dict[str, list[int]] = {v: [] for v in VIEWS}

    def add(self, view: str, n_prompt: int, n_target: int) -> None:
        self.prompt[view].append(n_prompt)
        self.target[view].append(n_target)

    def totals(self, view: str) -> list[int]:
        return [a + b for a, b in zip(self.prompt[view], self.target[view])]

    def report(self, max_lengths: Iterable[int]) -> dict:
        max_lengths = sorted(set(max_lengths))
        views = {}
        all_totals: list[int] = []
        for v in VIEWS:
            tot = self.totals(v)
            all_totals += tot
            views[v] = {"prompt": summarize(self.prompt[v]), "target": summarize(self.target[v]),
                        "total": summarize(tot), "n_rows": len(tot), "fits": fits_shares(tot, max_lengths)}
        return {"views": views, "all": {"total": summarize(all_totals), "n_rows": len(all_totals)},
                "fits": fits_shares(all_totals, max_lengths)}


# --------------------------------------------------------------------------- the TRAJECT-Bench measurement

def _count_boundary(bd, doc: str, fast, plain, counter, coll, seen: dict, verify_every: int) -> int:
    """Count the T/I/R rows of one boundary into ``coll``; every ``verify_every``-th row of a view is checked
    against the plain renderer. Returns the number of rows checked."""
    texts = view_texts(fast, bd.context, bd.reference, doc)
    check = None
    n_verified = 0
    for v, (p, c) in texts.items():
        np_, nc = counter.count(p), counter.count(c)
        if verify_every and seen[v] % verify_every == 0:
            if check is None:
                check = row_lengths(plain, bd.context, bd.reference, doc)
            if check[v] != (np_, nc):
                raise LengthMismatch(f"{bd.uid} view {v}: fast path counted {(np_, nc)} tokens (prompt, target), "
                                     f"Renderer.encode {check[v]}; rerun with --exact")
            n_verified += 1
        seen[v] += 1
        coll.add(v, np_, nc)
    return n_verified


def measure(bench, tokenizer, *, tokenizer_path: str | Path | None = None, sample: int | None = None,
            seed: int = 0, pool_k: int | None = 20, privilege: str = DEFAULT_PRIVILEGE,
            max_lengths: dict[int, list[str]] | Iterable[int] = (), enable_thinking: bool = False, exact: bool = False,
            verify_every: int = 100, progress: bool | Callable[[int], None] = False) -> dict:
    """Token lengths of the T/I/R rows of every boundary of the selected tasks (see module doc).

    ``sample``: a seeded subset of ``sample`` tasks (:func:`hpd.boundary.select_tasks`, as ``hpd replay
    --sample``); ``exact``: no shortcut at all (the plain :class:`Renderer`, every text encoded whole);
    ``verify_every``: check every n-th row of each view against ``Renderer.encode`` (0: never);
    ``progress``: a tqdm bar on stderr (True) or a callback given the boundaries done.
    Returns the ``token_lengths.json`` object.
    """
    from hpd.boundary import ReplayConfig, replay_task, select_tasks

    used = dict(max_lengths) if isinstance(max_lengths, dict) else {int(m): [] for m in max_lengths}
    cfg = ReplayConfig(pool_k=pool_k, privileges=(privilege,))
    tasks = select_tasks(bench, sample=sample, seed=seed)
    n_expected = sum(t.n_boundaries for t in tasks)
    plain = Renderer(tokenizer, enable_thinking=enable_thinking)
    fast = plain if exact else CachedRenderer(tokenizer, enable_thinking=enable_thinking)
    counter = TokenCounter(tokenizer, exact=exact)
    coll = LengthCollector()
    seen = {v: 0 for v in VIEWS}
    n_verified = 0
    n_b = 0
    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_expected, desc="token lengths", unit="bnd", dynamic_ncols=True, leave=False)
    t0 = time.perf_counter()
    try:
        for t in tasks:
            counter.trim()
            for bd in replay_task(t, bench, cfg):
                n_verified += _count_boundary(bd, bd.document_text(privilege), fast, plain, counter, coll, seen,
                                              verify_every)
                n_b += 1
            if bar is not None:
                bar.update(t.n_boundaries)
            elif callable(progress):
                progress(n_b)
    finally:
        if bar is not None:
            bar.close()
    rep = coll.report(used)
    out = {
        "tokenizer": tokenizer_info(tokenizer, tokenizer_path),
        "data": str(bench.data_dir),
        "n_tasks": len(tasks),
        "n_tasks_total": len(bench.tasks),
        "n_boundaries": n_b,
        "sample": sample,
        "seed": seed if sample is not None else None,
        "pool_k": pool_k,
        "privilege": privilege,
        "enable_thinking": enable_thinking,
        "targets": "reference actions (T, I); control document (R)",
        "lengths": "untrimmed (no tool output omitted); percentiles nearest-rank",
        "max_lengths": {str(k): list(v) for k, v in sorted(used.items())},   # value -> configs using it
        **{v: rep["views"][v] for v in VIEWS},
        "all": rep["all"],
        "fits": rep["fits"],
        "count_method": counter.mode,
        "rows_verified": n_verified,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    return out


def format_table(rep: dict) -> str:
    """The printed table of a :func:`measure` report."""
    tk = rep["tokenizer"]
    sel = f"{rep['n_tasks']} of {rep['n_tasks_total']} tasks" + (
        f" (seeded sample, seed {rep['seed']})" if rep.get("sample") is not None else " (all)")
    lines = [
        f"token lengths in {tk['name']} tokens ({tk['path']}), untrimmed",
        f"{sel}, {rep['n_boundaries']} boundaries; tool pool {rep['pool_k']}, document privilege "
        f"{rep['privilege']}; thinking {'on' if rep['enable_thinking'] else 'off'}; T/I targets = reference actions",
        f"{'view':<5}{'part':<8}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>8}{'mean':>10}{'rows':>8}",
    ]
    for v in VIEWS:
        d = rep[v]
        for part in ("prompt", "target", "total"):
            s = d[part]
            cells = "".join(f"{('-' if s[k] is None else s[k]):>8}" for k in ("p50", "p95", "p99", "max"))
            mean = "-" if s["mean"] is None else s["mean"]
            lines.append(f"{v if part == 'prompt' else '':<5}{part:<8}{cells}{mean:>10}"
                         f"{d['n_rows'] if part == 'prompt' else '':>8}")
    a = rep["all"]["total"]
    lines.append(f"{'all':<5}{'total':<8}"
                 + "".join(f"{('-' if a[k] is None else a[k]):>8}" for k in ("p50", "p95", "p99", "max"))
                 + f"{('-' if a['mean'] is None else a['mean']):>10}{rep['all']['n_rows']:>8}")
    if rep["fits"]:
        lines.append("rows (prompt + target) within max_length:")
        for m, share in rep["fits"].items():
            per = "  ".join(f"{v} {rep[v]['fits'][m]:.2%}" for v in VIEWS if rep[v]["fits"].get(m) is not None)
            used = rep["max_lengths"].get(m)
            where = (f"  [{len(used)} config(s): {', '.join(used[:3])}{', ...' if len(used) > 3 else ''}]" if used
                     else "  [no shipped config]")
            lines.append(f"  {int(m):>6}: all {share:.2%}  ({per}){where}" if share is not None else f"  {m}: -")
    lines.append(f"counted by {rep['count_method']}; {rep['rows_verified']} rows checked against Renderer.encode; "
                 f"{rep['seconds']} s")
    return "\n".join(lines)
