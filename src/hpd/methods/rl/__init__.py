"""Online RL baselines inside hpd's harness: GRPO, GSPO and GiGPO over one shared core.

* :mod:`.rollout`: training tasks, grouped episodes from the batched engine with exact token ids, the reward,
  GiGPO's anchor-state hash;
* :mod:`.advantage`: group-normalised (GRPO/GSPO) and two-level (GiGPO) advantages;
* :mod:`.loss`: per-token log-probs of sampled turns (shared prompts computed once) and the clipped losses;
* :mod:`.core`: :class:`~.core.RLTrainer`, the :class:`hpd.train.trainer.Trainer` recipe of one RL update;
* :mod:`.grpo`, :mod:`.gspo`, :mod:`.gigpo`: one module per method (``Config``, ``load_config``, ``run``),
  dispatched by ``hpd train --method grpo|gspo|gigpo`` (:mod:`hpd.methods`).
"""
