"""Policies: the one renderer/parser (:mod:`hpd.policy.chat`), tiny local Qwen3 models
(:mod:`hpd.policy.tiny`) and generation backends behind one interface (:mod:`hpd.policy.backends`).

Importing this package is cheap (no torch); backends import their engines lazily.
"""
