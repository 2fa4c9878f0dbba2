"""A small synthetic set of Pi-shaped boundary records (tests, tiny CPU configs, the benchmark).

Each task is a one-tool lookup ("weather in <city>", "price of <ticker>", "convert <n> USD to <cur>").
Two boundaries per task: the initial one (target: the tool call, arguments copied from the query)
and the one after the tool batch (target: a final text answer quoting the tool output). The control
document states the executable tools, what is pending and whether the run may end. Everything is a
deterministic function of ``seed``; nothing is learned from real data.
"""

from __future__ import annotations

import random

_TOOLS = [
    {"name": "get_weather", "description": "Current weather for a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    {"name": "get_price", "description": "Latest stock price for a ticker symbol.",
     "parameters": {"type": "object", "properties": {"ticker": {"type": "string"}}, "required": ["ticker"]}},
    {"name": "convert", "description": "Convert an amount of US dollars to another currency.",
     "parameters": {"type": "object", "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}},
                    "required": ["amount", "currency"]}},
]
_CITIES = ["Paris", "Lima", "Oslo", "Cairo", "Tokyo", "Quito", "Perth", "Dakar", "Seoul", "Bern"]
_TICKERS = ["ACME", "GLOB", "NOVA", "ZETA", "QUUX", "LYNX", "ORCA", "PIKE"]
_CURS = ["EUR", "JPY", "GBP", "CHF", "INR"]
SYSTEM_PROMPT = "You are a helpful assistant. Use the tools to answer; answer briefly when done."


def _assistant(content: list[dict], stop: str, ts: int) -> dict:
    return {"role": "assistant", "content": content, "stopReason": stop,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "api": "openai-completions", "provider": "synthetic", "model": "synthetic", "timestamp": ts}


def _document(tools: list[str], pending: str, may_end: bool, turn: int) -> str:
    return ("CONTROL DOCUMENT v1 (runtime)\n"
            f"turn: {turn}\n"
            f"executable tools: {', '.join(tools)}\n"
            f"pending: {pending}\n"
            f"last batch errors: none\n"
            f"termination allowed: {'yes' if may_end else 'no'}")


def synthetic_records(n_tasks: int = 24, seed: int = 0) -> list[dict]:
    """``2 * n_tasks`` boundary records (uid, context, target, reference, document)."""
    rng = random.Random(seed)
    out = []
    names = [t["name"] for t in _TOOLS]
    for t in range(n_tasks):
        kind = rng.randrange(3)
        if kind == 0:
            city = rng.choice(_CITIES)
            query, tool, args = f"What is the weather in {city}?", "get_weather", {"city": city}
            value = f"{rng.randint(-5, 35)} C and {rng.choice(['sunny', 'cloudy', 'rainy'])}"
            answer = f"The weather in {city} is {value}."
        elif kind == 1:
            tic = rng.choice(_TICKERS)
            query, tool, args = f"What is the price of {tic}?", "get_price", {"ticker": tic}
            value = f"{rng.randint(10, 999)}.{rng.randint(0, 99):02d} USD"
            answer = f"{tic} trades at {value}."
        else:
            amt, cur = rng.randint(1, 500), rng.choice(_CURS)
            query, tool, args = f"Convert {amt} USD to {cur}.", "convert", {"amount": amt, "currency": cur}
            value = f"{amt * rng.randint(1, 150) / 10:.2f} {cur}"
            answer = f"{amt} USD is {value}."
        ts = 1000 * t
        user = {"role": "user", "content": [{"type": "text", "text": query}], "timestamp": ts}
        call_id = f"call_{t}_0"
        call = _assistant([{"type": "toolCall", "id": call_id, "name": tool, "arguments": args}], "toolUse", ts + 1)
        result = {"role": "toolResult", "toolCallId": call_id, "toolName": tool,
                  "content": [{"type": "text", "text": value}], "details": None, "isError": False, "timestamp": ts + 2}
        final = _assistant([{"type": "text", "text": answer}], "stop", ts + 3)
        ctx0 = {"systemPrompt": SYSTEM_PROMPT, "tools": _TOOLS, "messages": [user]}
        ctx1 = {"systemPrompt": SYSTEM_PROMPT, "tools": _TOOLS, "messages": [user, call, result]}
        argtxt = ", ".join(f"{k}={v}" for k, v in args.items())
        out.append({"uid": f"synthetic#{t}/b0", "context": ctx0, "target": call, "reference": call,
                    "document": _document(names, f"call {tool}({argtxt})", False, 0)})
        out.append({"uid": f"synthetic#{t}/b1", "context": ctx1, "target": final, "reference": final,
                    "document": _document(names, f"answer the user from the {tool} result", True, 1)})
    return out
