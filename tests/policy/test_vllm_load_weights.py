"""``VLLMPolicy.load_weights``: a training model's merged weights written into a running in-process engine
(``rollout.engine: vllm`` of the RL trainers, :mod:`hpd.methods.rl.core`). Its own module: the engine must run in
this process, and tests/policy/test_vllm_backend.py keeps an in-process engine of its own for its whole module
(one in-process engine per process; a second runs in child processes, which take no tensors)."""

from policy_helpers import vllm_or_fail


def test_load_weights_puts_a_training_models_merged_weights_in_the_engine(tiny_dir, tmp_path):
    """``VLLMPolicy.load_weights(merged_weights(peft_model))`` (what ``rollout.engine: vllm`` does before each RL
    update): in fp32 the engine's greedy tokens become those of transformers + PEFT with the adapter, twice over
    (the second load replaces the first, after the LoRA weights change), and the training model is untouched."""
    vllm_or_fail()
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from hpd.policy.backends.hf import HFPolicy
    from hpd.policy.backends.vllm import VLLMPolicy
    from hpd.policy.merge import merged_weights

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32),
                           LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    prompts = ["<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n",
               "<|im_start|>user\nlookup alpha<|im_end|>\n<|im_start|>assistant\n"]
    engine = VLLMPolicy(str(tiny_dir), dtype="float32", cpu_threads=1, max_model_len=2048)
    try:
        base = [g[0].token_ids for g in engine.generate(prompts, n=1, temperature=0.0, max_new_tokens=16)]
        for step in range(2):
            if step:
                with torch.no_grad():
                    for n, p in model.named_parameters():
                        if "lora_B" in n:
                            p.mul_(-2.0)
            model.save_pretrained(str(tmp_path / f"a{step}"))
            want = [g[0].token_ids for g in HFPolicy(str(tiny_dir), adapter=str(tmp_path / f"a{step}"),
                                                     dtype="float32").generate(prompts, n=1, temperature=0.0,
                                                                               max_new_tokens=16)]
            engine.load_weights(merged_weights(model))
            got = [g[0].token_ids for g in engine.generate(prompts, n=1, temperature=0.0, max_new_tokens=16)]
            assert got == want and got != base, (step, got, want, base)
    finally:
        engine.close()
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters() if "lora_B" not in n)
