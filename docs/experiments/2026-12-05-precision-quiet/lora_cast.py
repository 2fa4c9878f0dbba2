"""peft's input cast around the LoRA products, on and off: SmolLM2 bf16 with fp32 LoRA r16 on all linear layers
under bf16 autocast, 2 rows x 512 tokens forward and backward, one thread, ROUNDS rounds of one update each way
after a warm-up round; prints JSON with the best times, the median of the rounds' on/off ratios (robust to load
that changes between rounds), both losses and the largest gradient difference.

Usage: python lora_cast.py MODEL_DIR [ROUNDS=8]   (a SmolLM2 folder, e.g. the <out>/base that hpd demo writes)
"""
import json
import statistics
import sys
import time

import torch
from peft import LoraConfig, get_peft_model
from peft.tuners.tuners_utils import BaseTunerLayer
from transformers import AutoModelForCausalLM

torch.set_num_threads(1)
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.bfloat16, attn_implementation="sdpa")
model.config.use_cache = False
torch.manual_seed(0)
model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
for name, p in model.named_parameters():
    if "lora_B" in name:
        torch.nn.init.normal_(p, std=0.02)   # a trained-looking adapter, so that its gradients flow everywhere
ids = torch.randint(0, 40000, (2, 512), generator=torch.Generator().manual_seed(0))


def step(cast: bool) -> tuple[float, float, torch.Tensor]:
    for mod in model.modules():
        if isinstance(mod, BaseTunerLayer):
            mod.cast_input_dtype_enabled = cast
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    seconds = time.perf_counter() - start
    return seconds, loss.item(), torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
times, last = {"on": [], "off": []}, {}
for i in range(rounds + 1):   # the first round warms up
    for cast, key in ((True, "on"), (False, "off")):
        t, loss, grads = step(cast)
        times[key] += [t] if i else []
        last[key] = (loss, grads)
print(json.dumps({"s_cast_on": min(times["on"]), "s_cast_off": min(times["off"]),
                  "speedup_best": min(times["on"]) / min(times["off"]),
                  "speedup_median_of_rounds": statistics.median(a / b for a, b in zip(times["on"], times["off"])),
                  "rounds": rounds, "loss_on": last["on"][0], "loss_off": last["off"][0],
                  "grad_max_abs_diff": (last["on"][1] - last["off"][1]).abs().max().item()}, indent=1))
