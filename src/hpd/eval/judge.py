"""Optional LLM judge for answer correctness (off by default), against any OpenAI-compatible endpoint.

``Judge(base_url, model, cache_path=None, api_key=None).answer_match(query, reference, prediction) -> bool``
restates TRAJECT's ``llm_eval.answer_match``: the judge decides whether the predicted answer is
semantically equivalent to the reference and covers its key points, and replies with strict JSON
``{"match": true|false}``. Temperature 0; up to 3 tries when the reply does not parse, then ``False``.
An empty prediction is ``False`` without a call. Verdicts are cached (in memory, and as JSON lines in
``cache_path`` if given) under ``sha256(model + "\\n" + prompt)``, so a rerun makes no calls.
``TS_judge`` in ``hpd.eval.metrics`` uses it.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

PROMPT = """You are grading an AI assistant's final answer against a reference answer.

User request:
{query}

Reference answer:
{reference}

Assistant's answer:
{prediction}

Does the assistant's answer match the reference: is it semantically equivalent and does it cover the key points \
(facts, numbers, entities, conclusions) of the reference? Minor wording or formatting differences do not matter. \
Reply with strict JSON only: {{"match": true}} or {{"match": false}}."""


class JudgeError(Exception):
    pass


def _parse(text: str) -> bool | None:
    m = re.search(r"\{[^{}]*\}", text or "", re.S)
    if not m:
        return None
    try:
        obj = json.loads(m.group(0))
    except ValueError:
        return None
    v = obj.get("match") if isinstance(obj, dict) else None
    return v if isinstance(v, bool) else None


class Judge:
    def __init__(self, base_url: str, model: str, *, cache_path: str | Path | None = None,
                 api_key: str | None = None, timeout: float = 60.0, tries: int = 3):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.tries = tries
        self.cache_path = Path(cache_path) if cache_path else None
        self.cache: dict[str, bool] = {}
        self.calls = 0
        if self.cache_path and self.cache_path.is_file():
            for line in self.cache_path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    rec = json.loads(line)
                    self.cache[rec["key"]] = bool(rec["match"])

    def _key(self, prompt: str) -> str:
        return hashlib.sha256((self.model + "\n" + prompt).encode("utf-8")).hexdigest()

    def _ask(self, prompt: str) -> str:
        import httpx
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {"model": self.model, "temperature": 0, "messages": [{"role": "user", "content": prompt}]}
        self.calls += 1
        try:
            r = httpx.post(f"{self.base_url}/chat/completions", json=body, headers=headers, timeout=self.timeout)
            r.raise_for_status()
            return r.json()["choices"][0]["message"]["content"] or ""
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as e:
            raise JudgeError(f"judge request failed: {type(e).__name__}: {e}") from e

    def answer_match(self, query: str, reference: str, prediction: str) -> bool:
        if not (prediction or "").strip():
            return False
        prompt = PROMPT.format(query=query, reference=reference, prediction=prediction)
        key = self._key(prompt)
        if key in self.cache:
            return self.cache[key]
        verdict = False
        for _ in range(self.tries):
            v = _parse(self._ask(prompt))
            if v is not None:
                verdict = v
                break
        self.cache[key] = verdict
        if self.cache_path:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.cache_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"key": key, "match": verdict}) + "\n")
        return verdict
