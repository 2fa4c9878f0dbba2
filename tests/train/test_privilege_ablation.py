"""Privilege levels as an ablation (issue 17): `data.teacher_level` refuses records taught at another level,
`data.r_target_level` makes the R view reconstruct that level's document, and `hpd teach` records carry every
compiled level."""

import pytest

from hpd.teacher.item import TeachItem
from hpd.teacher.run import training_record
from hpd.train.config import TrainConfig
from hpd.train.trainer import Trainer, TrainError, build_examples
from hpd.views import synthetic_records
from hpd.views.records import RecordError, check_privilege, documents_at

LEVELS = {"runtime": "DOC-RUNTIME executable tools", "plan": "DOC-PLAN remaining steps",
          "oracle": "DOC-ORACLE exact next action"}


def _records(n=2, level="plan"):
    return [dict(r, document=LEVELS[level], document_privilege=level, documents=dict(LEVELS))
            for r in synthetic_records(n, seed=0)]


def _cfg(tiny_dir, **data):
    return TrainConfig.model_validate({
        "model": {"path": str(tiny_dir), "precision": "fp32"}, "data": {"max_length": 2048, **data},
        "batch": {"global_batch": 2, "micro_batch_tokens": 2048},
        "schedule": {"phases": [{"views": {"T": 1, "I": 1, "R": 1}, "updates": 3}]},
        "logging": {"probe_examples": 0, "progress": False, "tensorboard": False}})


def test_r_view_reconstructs_the_configured_level(tiny_dir, tok):
    recs = _records()
    for level, want in ((None, "DOC-PLAN"), ("oracle", "DOC-ORACLE"), ("runtime", "DOC-RUNTIME")):
        ex, report = build_examples(recs, _cfg(tiny_dir, r_target_level=level), tok, ["T", "I", "R"])
        r_text = tok.decode(list(ex["R"][0].completion_ids))
        assert want in r_text and all(w not in r_text for w in ("DOC-PLAN", "DOC-ORACLE", "DOC-RUNTIME") if w != want)
        # the I view keeps the teacher's (plan) document in its prompt whatever R reconstructs
        assert "DOC-PLAN" in tok.decode(list(ex["I"][0].prompt_ids))
        assert report.stats("R").kept == len(recs) and len(ex["T"]) == len(recs)


def test_bad_levels_are_one_line_errors():
    recs = _records(level="plan")
    check_privilege(recs, "plan")
    with pytest.raises(RecordError, match=r"record 0 \(.*\): document_privilege is 'plan'.*'oracle'.*--privilege oracle"):
        check_privilege(recs, "oracle")
    no_docs = [dict(r) for r in recs]
    no_docs[1].pop("documents")
    with pytest.raises(RecordError, match=r"record 1 \(.*\): no documents\['runtime'\]"):
        documents_at(no_docs, "runtime")
    assert [r["document"] for r in documents_at(recs, "oracle")] == [LEVELS["oracle"]] * len(recs)
    assert recs[0]["document"] == LEVELS["plan"]                   # the input records are not changed


def test_trainer_refuses_records_of_another_teacher_level(tiny_dir, tmp_path):
    with pytest.raises(RecordError, match="data.teacher_level is 'runtime'"):
        Trainer(_records(level="plan"), _cfg(tiny_dir, teacher_level="runtime"), tmp_path / "r").setup()
    assert issubclass(RecordError, ValueError) and not issubclass(RecordError, TrainError)


def test_teach_records_carry_every_compiled_level():
    item = TeachItem(id="t#0/b0", context={"messages": []}, reference={"role": "assistant", "content": []},
                     restore=lambda: None, document=lambda p: LEVELS[p] if p != "runtime" else "")
    rec = {"boundary_id": "t#0/b0", "target": {"message": {"role": "assistant", "content": []}, "source": "teacher"},
           "reference": {"role": "assistant", "content": []}}
    tr = training_record(rec, item, "plan")
    assert tr["document"] == LEVELS["plan"] and tr["document_privilege"] == "plan"
    assert tr["documents"] == {"plan": LEVELS["plan"], "oracle": LEVELS["oracle"]}   # runtime was not compiled
