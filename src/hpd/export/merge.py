"""Export a model for deployment: ``<out>/`` is a plain Hugging Face model folder that transformers,
``hpd serve`` and ``hpd eval --model`` load as they load any base model.

* With an adapter: the base (``--model``) is loaded in float32, the PEFT adapter applied and merged
  into the weights (``peft``'s ``merge_and_unload``), and the merged model saved, in ``dtype`` (``--dtype``:
  auto | float32 | bfloat16, :mod:`hpd.policy.dtype`; ``auto`` = bfloat16 where this machine computes it
  natively, else float32; the manifest's ``dtype`` says which), as safetensors
  (``model.safetensors`` or shards + index) with its ``config.json`` and ``generation_config.json``; the
  adapter folder is copied unchanged to ``<out>/adapter/`` (so ``--model BASE --adapter OUT/adapter`` still
  works, and the merge can be checked against it).
* Without an adapter: the base model is re-saved the same way (a base-model card).
* The tokenizer files and chat template come from the adapter folder when it has its own tokenizer (what
  ``hpd train`` saves beside the adapter), else from the base.
* ``<out>/README.md``: the model card (:func:`hpd.export.card.model_card`), from the adapter's training
  manifest (``manifest.json`` in the adapter folder or its parent, as ``hpd train`` writes it) and the
  evaluation's ``metrics.json`` (``--eval DIR``, as ``hpd eval`` writes it) when given.
* ``<out>/manifest.json``: the run-folder manifest (inputs checksummed).

Every bad input is an :class:`ExportError` with one line naming the path.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hpd.policy.dtype import resolve_dtype_name
from hpd.policy.merge import save_merged
from hpd.runfolder import RunFolderError, finish_manifest, new_manifest, prepare_out, read_json, write_json, write_text

from .card import CardInputs, ExportError, model_card

def check_inputs(model: Path, adapter: Path | None, eval_dir: Path | None) -> None:
    if not (model / "config.json").is_file():
        raise ExportError(f"--model {model} is not a model folder (no config.json)")
    if adapter is not None and not (adapter / "adapter_config.json").is_file():
        raise ExportError(f"--adapter {adapter} is not a PEFT adapter folder (no adapter_config.json)")
    if eval_dir is not None and not (eval_dir / "metrics.json").is_file():
        raise ExportError(f"--eval {eval_dir} has no metrics.json (write one with hpd eval --out {eval_dir})")


def _eval_metrics(eval_dir: Path) -> dict:
    from hpd.eval.variant import read_metrics

    try:
        return read_metrics(eval_dir)
    except RunFolderError as e:
        raise ExportError(f"--eval: {e}") from None


def training_manifest(adapter: Path | None) -> tuple[dict | None, Path | None]:
    """The ``hpd train`` manifest for ``adapter`` (in the adapter folder or its parent) and where it was."""
    if adapter is None:
        return None, None
    for p in (adapter / "manifest.json", adapter.parent / "manifest.json"):
        if p.is_file():
            try:
                man = read_json(p, "training manifest")
            except RunFolderError as e:
                raise ExportError(str(e)) from None
            if not isinstance(man, dict):
                raise ExportError(f"training manifest {p} is not a JSON object")
            return man, p
    return None, None


def export_model(model: str | Path, out: str | Path, *, adapter: str | Path | None = None,
                 eval_dir: str | Path | None = None, name: str | None = None, license: str | None = None,
                 command: str | None = None, dtype: str = "auto") -> dict:
    """Write the export (module doc) into ``out``; returns the finished manifest."""
    model, out = Path(model), Path(out)
    adapter = Path(adapter) if adapter is not None else None
    eval_dir = Path(eval_dir) if eval_dir is not None else None
    check_inputs(model, adapter, eval_dir)
    try:
        dtype = resolve_dtype_name(dtype)
    except ValueError as e:
        raise ExportError(str(e)) from None
    train_man, train_path = training_manifest(adapter)
    metrics = _eval_metrics(eval_dir) if eval_dir is not None else None
    eval_man = read_json(eval_dir / "manifest.json", "evaluation manifest") \
        if eval_dir is not None and (eval_dir / "manifest.json").is_file() else None
    try:
        out = prepare_out(out)
    except RunFolderError as e:
        raise ExportError(str(e)) from None
    if out.resolve() in (model.resolve(), adapter.resolve() if adapter else None):
        raise ExportError(f"--out {out} is an input folder; export into a new folder")
    config = {"model": str(model), "adapter": str(adapter) if adapter else None, "eval": str(eval_dir) if eval_dir else None,
              "name": name, "license": license}
    man = new_manifest(command, config, inputs={"model": str(model), "adapter": str(adapter) if adapter else None,
                                                "eval_metrics": str(eval_dir / "metrics.json") if eval_dir else None},
                       dtype=dtype)
    write_json(out / "manifest.json", man)
    tok_src = save_merged(model, adapter, out, dtype)
    if adapter is not None:
        shutil.copytree(adapter, out / "adapter", dirs_exist_ok=True)
    card = model_card(CardInputs(model=model, adapter=adapter, out=out, name=name or out.name, license=license,
                                 training=train_man, training_path=train_path, metrics=metrics,
                                 metrics_path=eval_dir / "metrics.json" if eval_dir else None, eval_manifest=eval_man))
    write_text(out / "README.md", card)
    outputs = sorted(p.name for p in out.iterdir() if p.name != "manifest.json")
    finish_manifest(man, outputs=outputs, tokenizer_from=str(tok_src), merged=adapter is not None)
    write_json(out / "manifest.json", man)
    return man
