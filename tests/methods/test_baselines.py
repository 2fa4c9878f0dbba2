"""``hpd demo --baselines``: each method's config is its shipped file with the cell's typed settings written over it
as a nested mapping (hpd.methods.baselines.update), validated once; nothing goes through KEY=VALUE text."""

from pathlib import Path

from hpd.demo import config_for_model
from hpd.methods.baselines import BASELINES, method_config, shipped_config, update
from hpd.train.config import read_raw


def _paths(tmp_path: Path, sft: Path | None) -> dict:
    return dict(base=tmp_path / "base", sft=sft, data_dir=tmp_path / "data", split_file=tmp_path / "split.json",
                teach_dir=tmp_path / "teach", boundaries_dir=tmp_path / "bds")


def test_the_cell_is_written_over_the_shipped_config(tmp_path):
    cfg = config_for_model("smollm2", seed=3, updates=7, dtype="bfloat16")
    sft = tmp_path / "sft"
    sft.mkdir()
    (sft / "adapter_config.json").write_text("{}")
    d = method_config("dpo", cfg, kind="real", **_paths(tmp_path, sft))
    assert (d.name, d.seed, d.updates, d.model.path, d.model.precision) == ("dpo", 3, 7, str(tmp_path / "base"), "bf16")
    assert (d.lora.enabled, d.lora.r, d.lora.alpha) == (True, cfg.lora_r, cfg.lora_alpha)
    assert (d.data.teach, d.data.held_out_tasks, d.data.max_length) == (str(tmp_path / "teach"), 0, cfg.max_length)
    assert d.batch.global_batch == cfg.global_batch
    shipped = read_raw(shipped_config("dpo", "real"))
    assert d.dpo.beta == shipped["dpo"]["beta"]                     # the file's own settings stay
    g = method_config("grpo", cfg, kind="real", **_paths(tmp_path, sft))
    assert (g.model.path, g.model.adapter) == (str(tmp_path / "base"), str(sft))     # RL starts from the SFT adapter
    assert (g.data.path, g.data.split, g.data.limit, g.data.pool_k) == (str(tmp_path / "data"), "train", None,
                                                                        cfg.pool_k)
    assert (g.data.max_turns, g.rollout.max_new_tokens) == (cfg.eval_turns, cfg.max_new_tokens)


def test_full_finetuning_and_a_whole_sft_model(tmp_path):
    cfg = config_for_model("tiny")
    assert cfg.full_finetune
    whole = tmp_path / "sft-model"                                  # no adapter_config.json: a whole model
    for name, method in BASELINES.items():
        u = update(method, cfg, **_paths(tmp_path, whole))
        assert u["lora"] == {"enabled": False}
        c = method_config(method, cfg, kind="tiny", **_paths(tmp_path, whole))
        assert c.lora.enabled is False and c.name == method
        if method != "dpo":
            assert (c.model.path, c.model.adapter) == (str(whole), None)


def test_no_key_value_text(tmp_path):
    def strings(x):
        if isinstance(x, dict):
            return [s for v in x.values() for s in strings(v)]
        return [x] if isinstance(x, str) else []

    for method in BASELINES.values():
        u = update(method, config_for_model("smollm2"), **_paths(tmp_path, None))
        assert not [s for s in strings(u) if "=" in s]


def test_rl_rollouts_sample_on_the_cells_engine(tmp_path, monkeypatch):
    """The RL baselines' ``rollout.engine`` is the engine the cell generates with (``hpd.demo.resolve_backend``),
    written over the shipped config's; DPO has no rollouts."""
    import hpd.methods.baselines as baselines
    from hpd.demo import Demo

    cfg = config_for_model("smollm2")
    for engine in ("hf", "vllm"):
        g = method_config("gigpo", cfg, kind="real", engine=engine, **_paths(tmp_path, None))
        assert g.rollout.engine == engine
    assert "rollout" not in update("dpo", cfg, engine="vllm", **_paths(tmp_path, None))
    seen = {}
    monkeypatch.setattr("hpd.demo.resolve_backend", lambda c: "vllm" if c is cfg else "hf")
    monkeypatch.setattr(baselines, "train_baseline", lambda name, c, d, **kw: seen.update(kw) or d)
    Demo(cfg)._baseline("GRPO", tmp_path / "grpo", _paths(tmp_path, None))
    assert seen["engine"] == "vllm"
