import pytest


@pytest.fixture(scope="session")
def sample_tasks(bench):
    """A fixed, varied sample: parallel and sequential tasks, incl. ones with unscorable steps."""
    par = [t for t in bench.tasks if t.kind == "parallel"]
    seq = [t for t in bench.tasks if t.kind == "sequential"]
    unscorable = [t for t in seq if any(not s.scorable for s in t.steps)]
    offcat = [t for t in bench.tasks if any(s.key is None for s in t.steps)]
    picked = par[:6] + par[-3:] + seq[:6] + unscorable[:6] + offcat[:4]
    seen, out = set(), []
    for t in picked:
        if t.uid not in seen:
            seen.add(t.uid)
            out.append(t)
    assert unscorable and offcat, "the quirks of tests/conftest.py are missing"
    return out
