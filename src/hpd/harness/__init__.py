"""``hpd.harness``: the Pi agent loop in Python, pinned to ``@earendil-works/pi-agent-core`` 1.6.0.

- :mod:`hpd.harness.messages` Pi message dicts and constructors;
- :mod:`hpd.harness.tools` ``AgentTool`` / ``Environment``;
- :mod:`hpd.harness.validation` pi-schema argument validation with Pi's coercion and error texts;
- :mod:`hpd.harness.loop` the step-wise driver :class:`Harness` and :func:`run`;
- :mod:`hpd.harness.wire` OpenAI chat-completions rendering/parsing as Pi's openai-completions provider;
- :mod:`hpd.harness.conformance` runs scenario files through this loop and the real Pi (Node bridge).
"""

from hpd import PI_PACKAGE, PI_VERSION
from hpd.harness.loop import CounterClock, Harness, LoopConfig, MessageQueue, run
from hpd.harness.messages import (
    assistant_message,
    system_message,
    text,
    text_of,
    thinking,
    tool_call,
    tool_calls_of,
    tool_result_message,
    user_message,
    zero_usage,
)
from hpd.harness.tools import AgentTool, Environment, StaticEnv, tool_result

__all__ = [
    "PI_PACKAGE",
    "PI_VERSION",
    "AgentTool",
    "CounterClock",
    "Environment",
    "Harness",
    "LoopConfig",
    "MessageQueue",
    "StaticEnv",
    "assistant_message",
    "run",
    "system_message",
    "text",
    "text_of",
    "thinking",
    "tool_call",
    "tool_calls_of",
    "tool_result",
    "tool_result_message",
    "user_message",
    "zero_usage",
]
