"""A hand-written TRAJECT-layout folder with a never-seen domain ("Zoology") and every format quirk of the real
data that the loader must handle (names with two ': ', path-template tools, typed defaults, failed and
off-catalog steps, the sequential plan text that must never be shown, a templates file that is not tasks)."""

import json
from pathlib import Path


def _tool(name, desc, req=(), opt=(), domain="Zoology"):
    parent, _, api = name.partition(": ")
    return {"parent tool name": parent, "parent tool description": "p", "tool name": name,
            "tool description": desc, "API name": api, "domain name": domain,
            "required_parameters": [dict(p) for p in req], "optional_parameters": [dict(p) for p in opt],
            "code": "", "output_info": {}, "connected tools": []}


def P(name, type_, default="", desc=""):
    return {"name": name, "type": type_, "description": desc, "default": default}


def build_mini(root: Path) -> Path:
    """A tiny TRAJECT-layout folder with a never-seen domain ("Zoology") and every quirk."""
    d = root / "public_data"
    (d / "tools").mkdir(parents=True)
    (d / "parallel" / "Zoology").mkdir(parents=True)
    (d / "sequential" / "Zoology").mkdir(parents=True)
    tools = [
        _tool("Animal DB: Search", "Search animals by name.", [P("q", "STRING", "cat")],
              [P("limit", "NUMBER", 10), P("page", "NUMBER", 1), P("wild", "BOOLEAN", True)]),
        _tool("Animal DB: Habitat: Lookup", "Habitat of an animal (name with two ': ').", [P("id", "NUMBER", 1)]),
        _tool("Geo: Point", "Coordinates of a place.", [P("lat", "NUMBER", 0), P("lon", "NUMBER", 0)],
              [P("when", "DATE (YYYY-MM-DD)", "2024-01-01"), P("kind", "ENUM", "a"), P("extra", "string", "")]),
        _tool("Zoo API: /animals/{id}", "Path template tool.", []),
    ] + [_tool(f"Filler {i}: Noop", f"Distractor {i}.") for i in range(30)]
    (d / "tools" / "Zoology_tool.json").write_text(json.dumps(tools))

    def pstep(name, req, opt, out, desc="catalog-ish description"):
        s = {"tool name": name, "tool description": desc, "required parameters": req, "executed_output": out}
        if opt is not None:
            s["optional parameters"] = opt
        return s

    par = []
    for i in range(4):
        steps = [
            pstep("Animal DB: Search", [{"name": "q", "value": f"lion{i}"}], [{"name": "limit", "value": "5"}],
                  f"{{'hits': ['lion{i}']}}"),
            pstep("Animal DB: Habitat: Lookup", [{"name": "id", "value": str(100 + i)}], None, "{'habitat': 'savanna'}"),
            pstep("Geo: Point", [{"name": "lat", "value": 1.23456}, {"name": "lon", "value": "-7.5"}], [],
                  "{'ok': True}"),
            pstep("Missing Tool: Gone", [], [], "{'x': 1}"),
        ]
        par.append({"query": f"Tell me about lion{i} please.", "tool list": steps, "tool count": len(steps),
                    "trajectory_type": "parallel", "final_answer": f"Lion{i} lives in the savanna."})
    (d / "parallel" / "Zoology" / "simple_ver.json").write_text(json.dumps(par))
    hard = [dict(e, query=e["query"] + " (hard)") for e in par]
    (d / "parallel" / "Zoology" / "hard_ver.json").write_text(json.dumps(hard))

    seq = []
    for i in range(5):
        steps = [
            dict(pstep("Animal DB: Search", [{"name": "q", "value": "wolf"}], [], "{'hits': [{'id': 7}]}",
                       desc="SECRET-PLAN: use q then pick id"), execution_status="success"),
            dict(pstep("Geo: Point", [{"name": "lat", "value": 9}, {"name": "lon", "value": 9}], [],
                       "ERROR: Failed after 5 attempts", desc="SECRET-PLAN: point"), execution_status="failed"),
            dict(pstep("Animal DB: Habitat: Lookup", [{"name": "id", "value": 7 + i}], [], "{'habitat': 'forest'}",
                       desc="SECRET-PLAN: lookup again"), execution_status="success"),
            dict(pstep("Animal DB: Habitat: Lookup", [{"name": "id", "value": 7 + i}], [], "{'habitat': 'forest2'}",
                       desc="SECRET-PLAN: lookup repeat"), execution_status="success"),
        ]
        seq.append({"query": f"Where does wolf {i} live?", "tool_list": steps,
                    "final_answer": {"answer": f"Wolf {i} lives in the forest.", "reason": "REASON-NOT-ANSWER"},
                    "sequence_name": "Search -> Habitat", "num_tools_used": 4, "num_successful_tools": 3,
                    "domain": "Zoology", "executable": True,
                    "generation_info": {"domain_index": 0, "sequence_index": 0, "trajectory_index": i}})
    (d / "sequential" / "Zoology" / "traj_query.json").write_text(json.dumps(seq))
    (d / "sequential" / "Zoology" / "sequence.json").write_text(json.dumps([{"name": "t", "tool sequence": []}]))
    return d
