from typer.testing import CliRunner

from hpd.cli import app


def test_help_lists_commands():
    r = CliRunner().invoke(app, ["--help"])
    assert r.exit_code == 0
    assert "demo" in r.output
