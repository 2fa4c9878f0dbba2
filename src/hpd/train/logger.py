"""Per-view loss logging: CSV (always), TensorBoard (``tb/``, tag ``loss/<view>``), W&B (optional, import-guarded).

CSV columns are stable: see :data:`CSV_FIELDS`. On resume, rows at or after the resume update are
dropped first so the file holds each update exactly once.
"""

from __future__ import annotations

import csv
from pathlib import Path

CSV_FIELDS = ["update", "phase", "view", "loss", "supervised_tokens", "tokens", "examples", "lr", "grad_norm",
              "tokens_per_s", "elapsed_s", "peak_gb"]   # peak_gb: the update's peak memory (hpd.train.memory)


class MetricsLogger:
    def __init__(self, out_dir: Path, *, start_update: int, tensorboard: bool = True, wandb: bool = False,
                 wandb_project: str = "hpd", run_name: str = "hpd", config: dict | None = None) -> None:
        self.csv_path = out_dir / "metrics.csv"
        self._truncate(start_update)
        new = not self.csv_path.exists()
        self._f = self.csv_path.open("a", newline="")
        self._w = csv.DictWriter(self._f, fieldnames=CSV_FIELDS)
        if new:
            self._w.writeheader()
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
                self.tb = SummaryWriter(str(out_dir / "tb"), purge_step=start_update or None)
            except Exception as exc:  # tensorboard missing or broken: say so, keep CSV
                print(f"[hpd train] TensorBoard disabled: {exc}")
        self.wandb = None
        if wandb:
            try:
                import wandb as _wandb  # noqa: PLC0415
                self.wandb = _wandb.init(project=wandb_project, name=run_name, config=config or {}, resume="allow")
            except Exception as exc:
                print(f"[hpd train] W&B disabled: {exc}")

    def _truncate(self, start_update: int) -> None:
        if not self.csv_path.exists():
            return
        with self.csv_path.open() as f:
            # a killed run may leave a half-written last line: keep only complete rows before the resume point
            rows = [r for r in csv.DictReader(f)
                    if r.get("elapsed_s") not in (None, "") and r["update"].isdigit() and int(r["update"]) < start_update]
        with self.csv_path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
            w.writeheader()
            w.writerows(rows)

    def log(self, row: dict) -> None:
        self._w.writerow({k: row.get(k, "") for k in CSV_FIELDS})
        self._f.flush()
        u, v = row["update"], row["view"]
        if self.tb is not None:
            self.tb.add_scalar(f"loss/{v}", row["loss"], u)
            self.tb.add_scalar("lr", row["lr"], u)
            if row.get("grad_norm") not in (None, ""):
                self.tb.add_scalar(f"grad_norm/{v}", row["grad_norm"], u)
            self.tb.add_scalar("tokens_per_s", row["tokens_per_s"], u)
        if self.wandb is not None:
            self.wandb.log({f"loss/{v}": row["loss"], "lr": row["lr"], "tokens_per_s": row["tokens_per_s"]}, step=u)

    def close(self) -> None:
        self._f.close()
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def read_csv(path: Path) -> list[dict]:
    with Path(path).open() as f:
        return [dict(r, update=int(r["update"]), loss=float(r["loss"])) for r in csv.DictReader(f)]
