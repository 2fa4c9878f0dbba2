"""resume_or_clear: a stage rerun into a folder resumes from a finished checkpoint, else starts clean."""

from hpd.train.checkpoint import resume_or_clear


def test_finished_checkpoint_resumes_and_keeps_the_folder(tmp_path):
    ck = tmp_path / "run" / "checkpoints" / "update-00000004"
    ck.mkdir(parents=True)
    (ck / "state.json").write_text("{}")
    assert resume_or_clear(tmp_path / "run") is True
    assert (ck / "state.json").is_file()


def test_unfinished_run_is_cleared(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints" / ".tmp-update-00000002").mkdir(parents=True)   # killed while writing its first one
    (run / "metrics.csv").write_text("update,loss\n")
    assert resume_or_clear(run) is False
    assert not run.exists()
    assert resume_or_clear(tmp_path / "never") is False
