"""A study declared as a spec file, and where each of its cells stands: ``hpd study status``.

A **study spec** (``configs/studies/<name>.yaml``, docs/reports.md "Study") lists the study's cells as groups::

    study: issue35                  # its folder in the registry (results/<study>/)
    flags: {model: smollm2, ...}    # hpd demo flags every group shares (flag names without the dashes)
    groups:
      - name: main-table            # one hpd demo command
        arm: main                   # the run folder <root>/<arm>/ and the registry folder <study>/<arm>/
        label: main table
        flags: {teacher: auto}      # more flags (override the shared ones)
        defect_rates: [0.12]
        seeds: [0, 1, 2]
        variants: [Base, SFT, HPD-T, HPD]          # DPO, GRPO, GSPO, GiGPO add --baselines
      - name: bfcl
        kind: bfcl                  # BFCL transfer of trained variants of another arm
        arm: bfcl
        from_arm: main
        bfcl: {categories: [...], sample: 10, seed: 0, max_new_tokens: 512}
        ...
      - name: pi-to-smolagents
        kind: transfer              # trained variants of another arm evaluated in another harness
        arm: pi-to-smolagents
        from_arm: main
        harness: smolagents
        variants: [HPD]

An **arm** is one configuration of ``hpd demo`` (the groups of an arm must give the same flags): its cells differ
only in defect rate, seed and variant, and its run folder ``<root>/<arm>/`` is one :mod:`hpd.study` root. A
**cell** is (arm, defect rate, seed, variant), named by its registry path (:func:`hpd.report.registry.cell_id`).

:func:`study_status` compares the spec with the registry and the run folders: a cell is ``done`` (the registry
holds it, with the spec's config hash when the caller can compute it), ``resumable`` (the run folder holds the
variant's own stages: training checkpoints or a finished training, evaluation rows or a finished evaluation not yet
registered) or ``missing``; each comes with the command that resumes
it (``hpd study run SPEC --root ROOT --registry DIR --cells CELL``) and the ``hpd demo`` / ``hpd bfcl`` command
of its group. This module knows the demo's flags by name only; :mod:`hpd.study` turns a cell into a
:class:`hpd.demo.DemoConfig` (and its config hash).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hpd.runfolder import write_json

from .registry import RegistryError, cell_id, list_cells, read_cell

#: hpd demo's table rows and the baselines (--baselines) (hpd.demo.VARIANTS, hpd.demo.BASELINE_VARIANTS)
VARIANTS = ("Base", "SFT", "HPD-T", "HPD")
BASELINES = ("DPO", "GRPO", "GSPO", "GiGPO")
#: spec flag -> hpd.demo.DemoConfig field (the hpd demo options a spec may set); ``lora`` sets full_finetune
DEMO_FLAGS = {
    "model": "model", "size": "size", "updates": "updates", "global-batch": "global_batch", "lr": "lr",
    "lr-decay": "lr_decay", "warmup": "warmup_updates", "dtype": "dtype", "n-per-domain": "n_per_domain",
    "test-limit": "test_limit", "train-limit": "train_limit", "train-sample": "train_sample",
    "teacher": "teacher", "teach-attempts": "teach_attempts", "max-new-tokens": "max_new_tokens",
    "max-turns": "eval_turns", "baseline-updates": "baseline_updates", "probe-examples": "probe_examples",
    "data": "data", "lora": "full_finetune", "skip-bad": "skip_bad", "strict-catalog": "strict_catalog",
    "harness": "harness", "dpo-start": "dpo_start",
}
KINDS = ("demo", "bfcl", "transfer")
BFCL_KEYS = ("categories", "sample", "seed", "max_new_tokens")
STATES = ("done", "resumable", "missing")


class SpecError(ValueError):
    """A study spec that cannot be read or is inconsistent (one line)."""


@dataclass
class Group:
    name: str
    arm: str
    kind: str                       # demo | bfcl
    label: str
    flags: dict                     # every hpd demo flag of the arm (shared + the group's)
    defect_rates: list[float]
    seeds: list[int]
    variants: list[str]
    from_arm: str | None = None     # bfcl, transfer: the arm whose trained variants are evaluated
    bfcl: dict = field(default_factory=dict)
    harness: str | None = None      # transfer: the harness they are evaluated in


@dataclass(frozen=True)
class Cell:
    arm: str
    defect_rate: float
    seed: int
    variant: str
    group: str
    kind: str

    @property
    def id(self) -> str:
        return cell_id(self.arm, self.defect_rate, self.seed, self.variant)


@dataclass
class StudySpec:
    study: str
    path: Path
    groups: list[Group]

    def cells(self) -> list[Cell]:
        """Every cell once, in spec order (a cell two groups name belongs to the first)."""
        seen: dict[str, Cell] = {}
        for g in self.groups:
            for rate in g.defect_rates:
                for seed in g.seeds:
                    for v in g.variants:
                        c = Cell(g.arm, rate, seed, v, g.name, g.kind)
                        seen.setdefault(c.id, c)
        return list(seen.values())

    def group(self, name: str) -> Group:
        return next(g for g in self.groups if g.name == name)

    def arm_flags(self, arm: str) -> dict:
        return next(g.flags for g in self.groups if g.arm == arm)


def _floats(x: Any, what: str) -> list[float]:
    xs = x if isinstance(x, list) else [x]
    try:
        return [float(v) for v in xs]
    except (TypeError, ValueError):
        raise SpecError(f"{what} must be a number or a list of numbers, not {x!r}") from None


def _ints(x: Any, what: str) -> list[int]:
    xs = x if isinstance(x, list) else [x]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in xs):
        raise SpecError(f"{what} must be an integer or a list of integers, not {x!r}")
    return list(xs)


def load_spec(path: str | Path) -> StudySpec:
    """Read and check a study spec (YAML or JSON); one-line :class:`SpecError`."""
    import yaml

    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise SpecError(f"cannot read study spec {p}: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict) or not doc.get("study") or not isinstance(doc.get("groups"), list):
        raise SpecError(f"{p}: a study spec needs 'study: NAME' and a list 'groups'")
    shared = doc.get("flags") or {}
    groups = []
    for i, g in enumerate(doc["groups"]):
        where = f"{p} group {i + 1}"
        if not isinstance(g, dict) or not g.get("name") or not g.get("arm"):
            raise SpecError(f"{where}: a group needs 'name' and 'arm'")
        where = f"{p} group {g['name']!r}"
        flags = {**shared, **(g.get("flags") or {})}
        bad = sorted(set(flags) - set(DEMO_FLAGS))
        if bad:
            raise SpecError(f"{where}: {', '.join(bad)} not hpd demo flags a spec may set "
                            f"({', '.join(DEMO_FLAGS)})")
        kind = g.get("kind", "demo")
        if kind not in KINDS:
            raise SpecError(f"{where}: kind must be {', '.join(KINDS)}, not {kind!r}")
        variants = g.get("variants") or []
        known = {"demo": VARIANTS + BASELINES, "bfcl": VARIANTS, "transfer": VARIANTS[1:]}[kind]
        if not variants or any(v not in known for v in variants) or len(set(variants)) != len(variants):
            raise SpecError(f"{where}: variants must be distinct names of {', '.join(known)}")
        bfcl = dict(g.get("bfcl") or {})
        if kind == "bfcl":
            if not g.get("from_arm") or set(bfcl) - set(BFCL_KEYS) or not bfcl.get("categories"):
                raise SpecError(f"{where}: a bfcl group needs 'from_arm' and 'bfcl: {{categories, sample, seed, "
                                "max_new_tokens}}'")
        if kind == "transfer":
            _check_transfer(g, where)
        groups.append(Group(str(g["name"]), str(g["arm"]), kind, str(g.get("label") or g["name"]), flags,
                            _floats(g.get("defect_rates", 0.12), f"{where} defect_rates"),
                            _ints(g.get("seeds", 0), f"{where} seeds"), list(variants), g.get("from_arm"), bfcl,
                            g.get("harness")))
    names = [g.name for g in groups]
    if len(set(names)) != len(names):
        raise SpecError(f"{p}: group names must be distinct")
    by_arm: dict[str, Group] = {}
    for g in groups:
        first = by_arm.setdefault(g.arm, g)
        if first.flags != g.flags or first.kind != g.kind:
            raise SpecError(f"{p}: groups {first.name!r} and {g.name!r} share arm {g.arm!r} but not its flags "
                            "(an arm is one configuration: give the other group its own arm)")
    for g in groups:
        if g.kind != "demo" and (g.from_arm not in by_arm or by_arm[g.from_arm].kind != "demo"):
            raise SpecError(f"{p} group {g.name!r}: from_arm {g.from_arm!r} is not a demo arm of this spec")
    try:
        spec = StudySpec(str(doc["study"]), p, groups)
        spec.cells()
    except RegistryError as e:
        raise SpecError(f"{p}: {e}") from None
    return spec


def _check_transfer(g: dict, where: str) -> None:
    """A transfer group names the demo arm that trained its variants (``from_arm``) and a registered harness."""
    from hpd.harnesses.registry import HARNESS_SPECS

    if not g.get("from_arm") or g.get("harness") not in HARNESS_SPECS:
        raise SpecError(f"{where}: a transfer group needs 'from_arm' (the demo arm that trains its variants) and "
                        f"'harness' ({', '.join(HARNESS_SPECS)}: the harness they are evaluated in)")


def arm_harness(spec: StudySpec, arm: str) -> str:
    """The harness an arm's cells are evaluated in: its ``harness`` flag (demo; default pi), a transfer's own."""
    g = next(x for x in spec.groups if x.arm == arm)
    return g.harness if g.kind == "transfer" else g.flags.get("harness", "pi")


# ------------------------------------------------------------------------------------------ commands
def _join(items: list) -> str:
    return ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in items)


def flag_args(flags: dict) -> list[str]:
    """The hpd demo arguments of spec flags (``lora: false`` -> ``--full-finetune``; a true switch -> itself)."""
    out = []
    for k, v in flags.items():
        if k == "lora":
            out.append("--lora" if v else "--full-finetune")
        elif isinstance(v, bool):
            out += [f"--{k}"] if v else []
        elif v is not None:
            out += [f"--{k}", str(v)]
    return out


def demo_args(spec: StudySpec, arm: str, rates: list[float], seeds: list[int], variants: list[str], root: Path,
              registry: Path) -> list[str]:
    """``hpd demo`` arguments running ``variants`` of ``arm`` at these rates and seeds into the registry. Only
    baselines asked: the four table rows are given too (they are skipped when the registry holds them, and keep
    every cell of the run folder's study.json alike); the baselines asked follow them in ``--variants``, so the
    demo trains those alone (a DPO cell trained all four baselines before it evaluated DPO)."""
    rows = ([v for v in VARIANTS if v in variants] or list(VARIANTS)) + [b for b in BASELINES if b in variants]
    args = ["hpd", "demo", "--out", str(Path(root) / arm), "--seed", _join(seeds), "--defect-rate", _join(rates),
            "--variants", ",".join(rows)]
    if any(v in BASELINES for v in variants):
        args.append("--baselines")
    args += flag_args(spec.arm_flags(arm))
    return args + ["--registry", str(registry), "--study", spec.study, "--arm", arm]


def group_command(spec: StudySpec, group: Group, root: Path, registry: Path) -> str:
    """The one command of a demo group (every cell of it), the hpd bfcl command of a bfcl cell's group, or the
    hpd study run command of a transfer group's cells (no other command evaluates in the demo's held-out tasks)."""
    if group.kind == "transfer":
        return run_command(spec, root, registry, [c.id for c in spec.cells() if c.group == group.name])
    if group.kind == "bfcl":
        return " ".join(shlex.quote(a) for a in bfcl_args(spec, group, group.defect_rates[0], group.seeds[0],
                                                           group.variants[0], root))
    return " ".join(shlex.quote(a) for a in demo_args(spec, group.arm, group.defect_rates, group.seeds,
                                                      group.variants, root, registry))


def run_command(spec: StudySpec, root: Path, registry: Path, ids: list[str]) -> str:
    """``hpd study run`` of these cells into the registry."""
    return " ".join(shlex.quote(a) for a in ["hpd", "study", "run", str(spec.path), "--root", str(root),
                                             "--registry", str(registry), "--cells", ",".join(ids)])


def cell_command(spec: StudySpec, cell: Cell, root: Path, registry: Path) -> str:
    """The exact command that runs (or resumes) one cell and writes it to the registry."""
    return run_command(spec, root, registry, [cell.id])


def demo_cell_dir(root: Path, arm: str, rate: float, seed: int) -> Path:
    """A cell's run folder in a registry study: ``<root>/<arm>/defects-<r>/seed-<s>`` (hpd.study.cell_paths)."""
    return Path(root) / arm / f"defects-{rate:.2f}" / f"seed-{seed}"


def trained_dir(root: Path, arm: str, rate: float, seed: int, variant: str) -> Path | None:
    """Where hpd demo leaves a trained variant (a LoRA ``adapter/`` or a full ``model/``); None for Base."""
    if variant == "Base":
        return None
    d = demo_cell_dir(root, arm, rate, seed) / "train" / variant.lower()
    return d / "adapter" if (d / "adapter").is_dir() or not (d / "model").is_dir() else d / "model"


def bfcl_out(root: Path, cell: Cell) -> Path:
    return demo_cell_dir(root, cell.arm, cell.defect_rate, cell.seed) / cell.variant.lower()


def bfcl_args(spec: StudySpec, group: Group, rate: float, seed: int, variant: str, root: Path) -> list[str]:
    """``hpd bfcl`` on the base model of ``group.from_arm`` with the trained ``variant`` of that arm's cell."""
    flags = spec.arm_flags(group.from_arm)
    model = flags.get("model", "smollm2")          # hpd.demo.DEFAULT_MODEL (the orchestration floor, above)
    base = str(Path(root) / group.from_arm / "base") if model in ("tiny", "smollm2") else str(model)
    args = ["hpd", "bfcl", "--model", base]
    trained = trained_dir(root, group.from_arm, rate, seed, variant)
    if trained is not None:
        if trained.name == "model":
            args[3] = str(trained)
        else:
            args += ["--adapter", str(trained)]
    b = group.bfcl
    args += ["--categories", ",".join(b["categories"])]
    if b.get("sample"):
        args += ["--sample", str(b["sample"])]
    args += ["--seed", str(b.get("seed", 0))]
    if b.get("max_new_tokens"):
        args += ["--max-new-tokens", str(b["max_new_tokens"])]
    return args + ["--out", str(bfcl_out(root, Cell(group.arm, rate, seed, variant, group.name, "bfcl")))]


# ------------------------------------------------------------------------------------------ status
def _shard_rows(folder: Path) -> int:
    return sum(sum(1 for line in f.read_text(errors="replace").splitlines() if line.strip())
               for f in sorted((folder / "shards").glob("part-*.jsonl")))


def _stage(folder: Path, what: str) -> str | None:
    """One phrase for a stage folder: finished, its newest checkpoint, its logged rows, or started."""
    if not folder.exists():
        return None
    if (folder / "done.json").is_file() or (folder / "metrics.json").is_file() and what == "bfcl":
        return f"{what} finished"
    ckpts = sorted((folder / "checkpoints").glob("update-*"))
    if ckpts:
        return f"{what} at checkpoint {ckpts[-1].name}"
    rows = _shard_rows(folder)
    return f"{what} {rows} rows" if rows else f"{what} started"


def run_folder_state(cell: Cell, root: Path, harness: str | None = None) -> tuple[bool, str]:
    """``(started, what is there)`` of a cell in the run folders under ``root`` (``harness``: its arm's)."""
    from hpd.harnesses.registry import harness_folder

    root = Path(root)
    if cell.kind == "bfcl":
        s = _stage(bfcl_out(root, cell), "bfcl")
        return (s is not None, s or "")
    d = demo_cell_dir(root, cell.arm, cell.defect_rate, cell.seed)
    name = cell.variant.lower()
    if cell.kind == "transfer":
        s = _stage(d / "eval" / name, "eval")
        return (s is not None, s or "")
    if cell.variant == "Base":
        parts = [_stage(root / cell.arm / "eval" / harness_folder("base", harness), "eval")]
    else:
        parts = [_stage(d / "train" / name, "train"), _stage(d / "eval" / name, "eval")]
    parts = [p for p in parts if p]
    if not parts and d.is_dir():   # the cell ran other stages (data, teach, other variants): not this one yet
        held = ", ".join(sorted(x.name for x in d.iterdir() if not x.name.startswith(".")))
        return (False, f"not started; its seed folder (shared with the other variants) holds {held}")
    return (bool(parts), "; ".join(parts))


def study_status(spec: StudySpec, root: str | Path, registry: str | Path,
                 config_hash_of: Callable[[Cell], str | None] | None = None) -> dict:
    """Each cell of ``spec``: ``done`` / ``resumable`` / ``missing`` (module doc) with its commands.
    ``config_hash_of(cell)``: the config hash the registry must hold for ``done`` (None: any)."""
    root, registry = Path(root), Path(registry)
    have = list_cells(registry / spec.study)
    rows = []
    for cell in spec.cells():
        group = spec.group(cell.group)
        state, detail, command = "missing", "", cell_command(spec, cell, root, registry)
        if cell.id in have:
            try:
                got = read_cell(have[cell.id])
                want = config_hash_of(cell) if config_hash_of else None
                if want is None or got["manifest"]["config_hash"] == want:
                    man = got["manifest"]
                    state = "done"
                    detail = f"registered {str(man.get('started'))[:19]}, commit {str((man.get('git') or {}).get('commit'))[:10]}"
                    command = got["manifest"].get("command") or command
                else:
                    detail = (f"the registry holds another config (hash {got['manifest']['config_hash']}, the spec "
                              f"gives {want}): remove {have[cell.id]} to run it again")
            except RegistryError as e:
                detail = str(e)
        if state != "done":
            started, what = run_folder_state(cell, root, arm_harness(spec, cell.arm))
            if started:
                state = "resumable"
            detail = "; ".join(x for x in (detail, what) if x)
            if cell.kind != "demo":
                trained = trained_dir(root, group.from_arm, cell.defect_rate, cell.seed, cell.variant)
                if trained is not None and not trained.is_dir():
                    detail = "; ".join(x for x in (detail, f"needs the trained {cell.variant} in {trained} (run "
                                                   f"{group.from_arm}/defects-{cell.defect_rate:.2f}/seed-"
                                                   f"{cell.seed}/{cell.variant} first; weights are not kept "
                                                   "in the registry)") if x)
        rows.append({"cell": cell.id, "group": cell.group, "label": group.label, "arm": cell.arm, "kind": cell.kind,
                     "defect_rate": cell.defect_rate, "seed": cell.seed, "variant": cell.variant, "state": state,
                     "detail": detail, "command": command,
                     "group_command": group_command(spec, group, root, registry) if cell.kind != "bfcl"
                     else " ".join(shlex.quote(a) for a in bfcl_args(spec, group, cell.defect_rate, cell.seed,
                                                                      cell.variant, root))})
    counts = {s: sum(1 for r in rows if r["state"] == s) for s in STATES}
    extra = sorted(set(have) - {r["cell"] for r in rows})
    return {"study": spec.study, "spec": str(spec.path), "root": str(root), "registry": str(registry),
            "counts": counts, "cells": rows, "not_in_spec": extra}


def write_status(status: dict, out: str | Path) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return write_json(out / "status.json", status)


def status_lines(status: dict) -> list[str]:
    """The status as text: one line per cell, then the command that resumes it when it is not done."""
    c = status["counts"]
    lines = [f"study {status['study']} ({status['spec']}): {c['done']} done, {c['resumable']} resumable, "
             f"{c['missing']} missing; run folders {status['root']}, registry {status['registry']}"]
    for r in status["cells"]:
        lines.append(f"{r['state']:<9} {r['cell']:<40} {r['label']}" + (f"  [{r['detail']}]" if r["detail"] else ""))
        if r["state"] != "done":
            lines.append(f"          $ {r['command']}")
    if status["not_in_spec"]:
        lines.append("in the registry, not in the spec: " + ", ".join(status["not_in_spec"]))
    return lines

