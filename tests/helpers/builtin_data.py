"""The test data every test uses unless it checks a TRAJECT-Bench fact: the built-in benchmark
(:mod:`hpd.bench.builtin`, seed 0, 10 tasks per domain and kind) with three quirks of the real data written
into it, so replay, documents, verification and metrics meet what TRAJECT-Bench holds."""

import json
from pathlib import Path

#: what add_traject_quirks changes, by task uid
QUIRKS = {
    "failed": "sequential/Math/traj_query.json#0",        # step 0 recorded as failed
    "invalid": "sequential/Shop/traj_query.json",          # + '#<i>': first 3-step task, a required argument dropped
    "off_catalog": "parallel/Travel/simple_ver.json#0",    # + a call to a tool that is not in the catalog
}
N_PER_DOMAIN = 10


def add_traject_quirks(d: Path) -> Path:
    """Write three quirks of the real data into a generated folder (see module docstring)."""
    def edit(rel: str, fn) -> None:
        p = d / rel
        entries = json.loads(p.read_text(encoding="utf-8"))
        fn(entries)
        p.write_text(json.dumps(entries, ensure_ascii=False, indent=1), encoding="utf-8")

    def failed(entries):
        step = entries[0]["tool list"][0]
        step["execution_status"] = "failed"
        step["executed_output"] = "ERROR: Failed after 5 attempts"

    def invalid(entries):
        i = next(i for i, e in enumerate(entries) if len(e["tool list"]) == 3)
        QUIRKS["invalid_uid"] = f"{QUIRKS['invalid']}#{i}"
        entries[i]["tool list"][1]["required parameters"].pop(0)

    def off_catalog(entries):
        steps = entries[0]["tool list"]
        steps.append({"tool name": "Missing Tool: Gone", "tool description": "A tool that left the catalog.",
                      "required parameters": [{"name": "q", "value": "x"}], "optional parameters": [],
                      "executed_output": "{'x': 1}"})
        entries[0]["tool count"] = len(steps)

    edit(QUIRKS["failed"].split("#")[0], failed)
    edit(QUIRKS["invalid"], invalid)
    edit(QUIRKS["off_catalog"].split("#")[0], off_catalog)
    return d


def builtin_folder(root: Path) -> Path:
    """Generate the built-in benchmark under ``root/public_data`` and add the quirks; returns the folder."""
    from hpd.bench.builtin import generate

    return add_traject_quirks(generate(Path(root) / "public_data", seed=0, n_per_domain=N_PER_DOMAIN))
