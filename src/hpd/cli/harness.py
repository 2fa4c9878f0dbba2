"""`hpd harness ...`: the Pi agent loop (hpd.harness) and its conformance suite against the real Pi."""

from __future__ import annotations

import platform
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
        from hpd.harness.scenario import ScenarioError
        from hpd.runfolder import checksum, finish_manifest, new_manifest, write_json

        folder = scenarios or cf.SCENARIO_DIR
        man = new_manifest("hpd harness conformance", {"scenarios": str(folder)},
                           inputs={"scenarios": {"path": str(folder), "sha256": checksum(folder, "*.json")}},
                           node_bridge=str(br.bridge_dir()), python=platform.python_version())

        def show(r) -> None:
            status = "identical" if r.identical else "DIFFERS"
            detail = "" if r.identical else f"  {r.difference or r.error}"
            typer.echo(f"{status:9} {r.name}  ({r.boundaries} boundaries, {r.events} events){detail}")

        try:
            results = cf.run_conformance(folder, on_result=show)
        except (ScenarioError, br.BridgeUnavailable) as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2)
        line = cf.summary_line(results)
        typer.echo(line)
        if out is not None:
            n_ok = sum(r.identical for r in results)
            write_json(out / "conformance.json", {
                "pi_package": hpd.PI_PACKAGE, "pi_version": hpd.PI_VERSION, "n_scenarios": len(results),
                "n_identical": n_ok, "all_identical": n_ok == len(results), "summary": line,
                "scenarios": [r.to_json() for r in results]})
            write_json(out / "manifest.json", finish_manifest(man))
        if not all(r.identical for r in results):
            raise typer.Exit(1)

    app.add_typer(sub, name="harness")
