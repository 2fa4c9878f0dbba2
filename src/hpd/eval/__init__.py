"""``hpd.eval``: metrics (:mod:`hpd.eval.metrics`), the reference policy and evaluation driver
(:mod:`hpd.eval.reference`), the optional LLM judge (:mod:`hpd.eval.judge`)."""
