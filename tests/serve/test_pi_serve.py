"""Integration: the REAL Pi loop (Node, pinned pi-agent-core, Pi's own openai-completions provider)
against ``hpd serve`` with a tiny model taught to call a tool. Pi executes the call our model emits and
the episode ends on the model's final answer; at every boundary the ids the server saw equal the
training ids for the context Pi had (token equality across the real wire)."""

from __future__ import annotations

import pytest

from hpd.policy import chat
from hpd.policy.backends.hf import HFPolicy
from hpd.serve.app import BackgroundServer
from policy_helpers import LOOKUP_FINAL, LOOKUP_QUERY, LOOKUP_SYSTEM, LOOKUP_TOOL


def _bridge_or_skip():
    from hpd.harness.bridge import BridgeUnavailable, check_bridge

    try:
        check_bridge()
    except BridgeUnavailable as exc:
        pytest.skip(f"real-Pi integration needs the Node bridge: {exc}")


@pytest.mark.slow
@pytest.mark.node
def test_real_pi_episode_against_hpd_serve(taught_dir):
    _bridge_or_skip()
    from hpd.serve.pi_episode import run_pi_episode

    policy = HFPolicy(str(taught_dir))
    executed = []

    def tools(name, tool_call_id, args):
        executed.append((name, args))
        return {"content": [{"type": "text", "text": f"value-for-{args['key']}"}], "details": {}}

    with BackgroundServer(policy, default_max_tokens=64) as srv:
        res = run_pi_episode(srv.base_url, prompts=[LOOKUP_QUERY], tools=[LOOKUP_TOOL], tool_handler=tools,
                             system_prompt=LOOKUP_SYSTEM, temperature=0, max_tokens=64, timeout=180)
        log = list(srv.app.state.requests)

    msgs = res["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "toolResult", "assistant"]
    assert executed == [("lookup", {"key": "alpha"})]  # Pi executed the call our model emitted
    call = msgs[2]["content"][0]
    assert call["type"] == "toolCall" and call["name"] == "lookup" and msgs[2]["stopReason"] == "toolUse"
    assert msgs[3]["toolCallId"] == call["id"] and not msgs[3]["isError"]
    assert msgs[4]["content"] == [{"type": "text", "text": LOOKUP_FINAL}] and msgs[4]["stopReason"] == "stop"
    assert [e["type"] for e in res["events"]][-1] == "agent_end"

    # token equality at both boundaries, against the context Pi actually had
    tok = policy.tokenizer
    system, conv = msgs[0], msgs[1:]
    boundaries = [i for i, m in enumerate(conv) if m["role"] == "assistant"]
    assert len(log) == len(boundaries) == 2
    for k, i in enumerate(boundaries):
        ctx = {"systemPrompt": system["content"], "tools": system["toolsAdded"], "messages": conv[:i]}
        p_ids, c_ids = chat.encode_example(tok, chat.render_prompt(tok, ctx), chat.render_action(tok, conv[i]))
        assert log[k]["prompt_ids"] == p_ids
        assert log[k]["completion_ids"][0] == c_ids
