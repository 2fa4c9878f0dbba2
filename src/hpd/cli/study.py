"""``hpd study``: a declared study (configs/studies/<name>.yaml) against its run folders and results registry.

* ``hpd study status ROOT --registry results --study NAME`` (the spec ``configs/studies/NAME.yaml``, or
  ``--spec FILE``): every cell ``done`` / ``resumable`` / ``missing`` with the command that resumes it
  (:mod:`hpd.report.studyplan`); ``--out DIR`` writes ``DIR/status.json``.
* ``hpd study run SPEC --root ROOT --registry results [--cells CELL,...]``: runs the cells the registry lacks,
  one (arm, rate, seed) after another, each variant written to the registry when its evaluation ends
  (:func:`hpd.study.run_spec`).
* ``hpd study attach-teacher results/<study> [--runs ROOT]``: gives each registered HPD / HPD-T cell that lacks
  ``teacher.json`` (what its teacher did, :mod:`hpd.report.studywhy`) the one its run folder's results.json holds.

Bad input (an unreadable spec, an unknown cell) is one line on stderr and exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

study_app = typer.Typer(help="A declared study (configs/studies/*.yaml): status of its cells, run the missing ones.",
                        no_args_is_help=True)

SPEC_HELP = "Study spec (YAML): the study's name and its groups of cells (docs/reports.md, Study)."


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def _spec(path: Path):
    from hpd.report.studyplan import SpecError, load_spec

    try:
        return load_spec(path)
    except SpecError as e:
        _fail(str(e))


@study_app.command("status")
def status_cmd(
    root: Path = typer.Argument(..., help="The study's run folders (outside the repository, e.g. ~/hpd-runs/study): "
                                          "<root>/<arm>/defects-<r>/seed-<s>/."),
    registry: Path = typer.Option(Path("results"), "--registry", help="The results registry (results/ in the "
                                                                     "repository)."),
    study: Optional[str] = typer.Option(None, "--study", help="The study's name: its spec is "
                                                              "configs/studies/<NAME>.yaml."),
    spec: Optional[Path] = typer.Option(None, "--spec", help=SPEC_HELP + " Default: configs/studies/<study>.yaml."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write <out>/status.json."),
) -> None:
    """List the study's cells: done (in the registry), resumable (a started run folder) or missing, with the
    command that resumes each."""
    from hpd.report.studyplan import status_lines, write_status
    from hpd.runfolder import RunFolderError
    from hpd.study import spec_status

    if spec is None and study is None:
        _fail("give --study NAME (the spec configs/studies/NAME.yaml) or --spec FILE")
    from hpd.resources import config_file

    s = _spec(spec if spec is not None else config_file(Path("configs") / "studies" / f"{study}.yaml"))
    if study is not None and s.study != study:
        _fail(f"{s.path} is the spec of study {s.study!r}, not {study!r}")
    try:
        st = spec_status(s, root.expanduser(), registry)
    except (RunFolderError, TypeError, ValueError) as e:
        _fail(f"{type(e).__name__}: {e}")
    for line in status_lines(st):
        typer.echo(line)
    if out is not None:
        typer.echo(f"wrote {write_status(st, out)}")


@study_app.command("run")
def run_cmd(
    spec: Path = typer.Argument(..., help=SPEC_HELP),
    root: Path = typer.Option(..., "--root", help="The study's run folders (outside the repository)."),
    registry: Path = typer.Option(Path("results"), "--registry", help="The results registry."),
    cells: Optional[str] = typer.Option(None, "--cells", help="Comma-separated cell ids (hpd study status lists "
                                                              "them); default: every cell not done."),
) -> None:
    """Run the study's cells that the registry lacks; each finished variant goes to the registry at once. A kill
    (SIGTERM) is a Ctrl-C, as for ``hpd demo``: the running cell stops its vLLM engine and the command says how to
    resume."""
    import signal

    from hpd.cli.demo import sigterm_as_interrupt
    from hpd import study
    from hpd.demo import setup_threads
    from hpd.runfolder import RunFolderError

    s = _spec(spec)
    setup_threads()
    signal.signal(signal.SIGTERM, sigterm_as_interrupt)   # else a SIGTERM left the teacher's engine running (4.4 GB)
    wanted = [c.strip() for c in cells.split(",") if c.strip()] if cells else None
    try:
        ran = study.run_spec(s, root.expanduser(), registry, wanted, log=lambda m: typer.echo(m))
    except RunFolderError as e:
        _fail(str(e))
    except KeyboardInterrupt:
        typer.echo(f"interrupted; rerun the same command to resume from {root}")
        raise typer.Exit(130)
    except Exception as e:   # one line, as hpd demo's: e.g. an evaluation folder of another config (EvalError)
        typer.echo(f"error: {type(e).__name__}: {e} (finished stages are kept in {root}; rerun the same command "
                   "to resume)", err=True)
        raise typer.Exit(1)
    typer.echo(f"ran {len(ran)} cell(s)" + (": " + ", ".join(ran) if ran else " (every asked cell is done)"))


@study_app.command("attach-teacher")
def attach_teacher_cmd(
    study_dir: Path = typer.Argument(..., help="A study folder of the registry (results/<study>)."),
    runs: Optional[Path] = typer.Option(None, "--runs", help="Where the cells' run folders are now "
                                                             "(<runs>/<arm>/defects-<r>/seed-<s>), when they moved; "
                                                             "default: each cell manifest's run_folder."),
) -> None:
    """Add teacher.json (the teacher's acceptance, targets and defect accounting, from the results.json of the
    run folder that evaluated the cell) to the HPD and HPD-T cells registered without it; `hpd report --study`
    shows it."""
    from hpd.report.registry import RegistryError, attach_teachers

    if not study_dir.is_dir():
        _fail(f"{study_dir} is not a folder (give results/<study>)")
    try:
        done = attach_teachers(study_dir, runs.expanduser() if runs else None)
    except RegistryError as e:
        _fail(str(e))
    for cid, what in done:
        typer.echo(f"{cid}: {what}")
    typer.echo(f"{sum(w.startswith('attached') for _, w in done)} of {len(done)} cell(s) without teacher.json "
               "attached")


def register(app: typer.Typer) -> None:
    app.add_typer(study_app, name="study")
