"""Rollouts for RL: exact token ids per turn, seeds independent of the batch, the task order, the reward, and the
GiGPO anchor hash of harness states (identical states share it, different ones do not)."""

import pytest

from hpd.harness.messages import assistant_message, text, tool_call, tool_result_message
from hpd.methods.rl.advantage import step_group_sizes
from hpd.methods.rl.config import RewardSettings
from hpd.methods.rl.rollout import (RecordingPolicy, anchor_hash, anchor_state, episode_reward, rollout_seed,
                                    run_groups, update_slots)


def _call(i, key, name="Keys: lookup"):
    return assistant_message([tool_call(f"c{i}", name, {"key": key})])


def _anchors(keys, task, actions) -> list[str]:
    """The anchor before each action of a scripted episode in the real harness."""
    from hpd.bench.episode import start_episode

    st = start_episode(task, keys, env_kwargs={"k": 5}, max_turns=6)
    out = []
    for a in actions:
        out.append(anchor_hash(st.harness.messages))
        st.harness.step(a)
    return out


def test_anchor_groups_identical_harness_states(keys):
    t = keys.tasks[0]
    final = assistant_message([text("Done: value-for-alpha.")])
    a = _anchors(keys, t, [_call(0, "alpha"), final])
    # a failed call (unknown tool) and a call without a recorded answer change nothing in the environment
    b = _anchors(keys, t, [_call(0, "alpha", name="Nope: tool"), _call(1, "zeta"), _call(2, "alpha"), final])
    c = _anchors(keys, t, [final])
    init, after = a
    assert b[0] == b[1] == b[2] == c[0] == init           # same state: nothing obtained yet
    assert b[3] == after != init                          # same state: lookup(alpha) obtained (other call ids)
    assert step_group_sizes([0, 0, 0], [a, b, c]) == {2: 1, 5: 1}


def test_anchor_state_is_canonical():
    def result(i, key, out, err=False):
        return [_call(i, key), tool_result_message(f"c{i}", "Keys: lookup", [text(out)], {}, err)]

    x = result(0, "alpha", "A") + result(1, "beta", "B")
    y = result(7, "beta", "B") + result(3, "alpha", "A") + result(4, "alpha", "A")   # order, ids, repeats
    assert anchor_hash(x) == anchor_hash(y)
    assert anchor_state(x) == {"results": [["keys: lookup", [["key", "alpha"]], "A"],
                                           ["keys: lookup", [["key", "beta"]], "B"]]}
    assert anchor_hash(x) != anchor_hash(result(0, "alpha", "A") + result(1, "beta", "C"))      # other result text
    assert anchor_hash(x) != anchor_hash(result(0, "alpha", "A"))                              # less obtained
    assert anchor_hash(result(0, "alpha", "A")) == anchor_hash(result(0, "alpha", "A") + result(1, "beta", "B", True))


def test_update_slots_cover_every_task_per_epoch_and_are_pure():
    n = 5
    seen = update_slots(n, 0, 3, seed=1) + update_slots(n, 1, 2, seed=1)[:2]
    assert sorted(update_slots(n, 0, 5, seed=1)) == list(range(5))
    assert update_slots(n, 7, 3, seed=1) == update_slots(n, 7, 3, seed=1) and len(seen) == 5
    assert rollout_seed(0, 1, 2, 3, 0) != rollout_seed(0, 1, 2, 4, 0) != rollout_seed(0, 2, 2, 3, 0)


def test_episode_reward_by_hand():
    w = RewardSettings(ts=1.0, rc=0.3, step_sr=0.5, f1=0.0)
    row = {"TS": 1.0, "Step-SR": 1.0, "F1": 0.4}
    # RC_ep = 2/3 -> R = 1 + 0.5 + 0.3 * 2/3 = 1.7; per turn 0.3 * valid / 3, outcome on the last turn
    r, steps = episode_reward(row, [True, False, True], w)
    assert r == pytest.approx(1.7) and steps == pytest.approx([0.1, 0.0, 0.1 + 1.5]) and sum(steps) == pytest.approx(r)
    assert episode_reward(row, [], w) == (1.5, [])


def test_rollout_records_exact_ids_and_is_batch_independent(keys, tiny_dir):
    from hpd.policy import chat
    from hpd.policy.backends.hf import HFPolicy

    pol = HFPolicy(str(tiny_dir))
    kw = {"group_size": 2, "weights": RewardSettings(), "env_kwargs": {"k": 5}, "max_turns": 2}
    rec = RecordingPolicy(pol, seed=3, update=5, max_new_tokens=24)
    eps, _ = run_groups(keys, [(0, keys.tasks[0]), (1, keys.tasks[1])], rec, **kw)
    assert [(e.slot, e.g) for e in eps] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    first = eps[0].turns[0]
    from hpd.bench.episode import start_episode
    st = start_episode(keys.tasks[0], keys, env_kwargs={"k": 5}, max_turns=2)
    prompt = chat.render_prompt(pol.tokenizer, st.harness.context())
    assert first.prompt_ids == pol.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert len(first.completion_ids) == len(first.sampler_logprobs) > 0 and first.anchor == anchor_hash([])
    # the same (seed, update, slot, g) gives the same episode whatever else is in the batch
    alone, _ = run_groups(keys, [(1, keys.tasks[1])], RecordingPolicy(pol, seed=3, update=5, max_new_tokens=24), **kw)
    assert [t.completion_ids for t in alone[1].turns] == [t.completion_ids for t in eps[3].turns]
    assert eps[0].turns[0].completion_ids != eps[1].turns[0].completion_ids    # rollouts of a group differ
