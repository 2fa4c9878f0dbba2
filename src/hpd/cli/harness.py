"""`hpd harness ...`: the Pi agent loop (hpd.harness) and its conformance suite against the real Pi."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Optional

import typer

import hpd


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="The Pi agent loop in Python (hpd.harness), pinned to "
                      f"{hpd.PI_PACKAGE}@{hpd.PI_VERSION}, and its conformance suite.", no_args_is_help=True)

    @sub.command("conformance")
    def conformance(
        scenarios: Optional[Path] = typer.Option(None, "--scenarios", help="Folder of scenario *.json files "
                                                 "(default: the built-in library, src/hpd/harness/scenarios)."),
        out: Optional[Path] = typer.Option(None, "--out", help="Write conformance.json + manifest.json here."),
    ) -> None:
        """Run every scenario through our loop and the real Pi loop (Node bridge); compare events,
        transcripts and provider contexts. Exit 1 if any scenario differs."""
        from hpd.harness import bridge as br
        from hpd.harness import conformance as cf
        from hpd.harness.scenario import ScenarioError, load_scenarios

        folder = scenarios or cf.SCENARIO_DIR
        try:
            loaded = load_scenarios(folder)
        except ScenarioError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2)
        try:
            br.check_bridge()
        except br.BridgeUnavailable as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2)
        t0 = time.time()
        results = []
        for s in loaded:
            r = cf.run_scenario(s)
            results.append(r)
            status = "identical" if r.identical else "DIFFERS"
            detail = "" if r.identical else f"  {r.difference or r.error}"
            typer.echo(f"{status:9} {r.name}  ({r.boundaries} boundaries, {r.events} events){detail}")
        line = cf.summary_line(results)
        typer.echo(line)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            n_ok = sum(r.identical for r in results)
            (out / "conformance.json").write_text(json.dumps({
                "pi_package": hpd.PI_PACKAGE, "pi_version": hpd.PI_VERSION, "n_scenarios": len(results),
                "n_identical": n_ok, "all_identical": n_ok == len(results), "summary": line,
                "scenarios": [r.to_json() for r in results]}, indent=2))
            (out / "manifest.json").write_text(json.dumps({
                "command": "hpd harness conformance", "config": {"scenarios": str(folder)},
                "code_version": hpd.__version__, "pi_package": hpd.PI_PACKAGE, "pi_version": hpd.PI_VERSION,
                "data_path": str(folder), "seed": None, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "seconds": round(time.time() - t0, 2), "node_bridge": str(br.bridge_dir()),
                "python": platform.python_version()}, indent=2))
        if not all(r.identical for r in results):
            raise typer.Exit(1)

    app.add_typer(sub, name="harness")
