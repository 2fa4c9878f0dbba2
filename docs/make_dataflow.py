"""Draw docs/dataflow.svg, the data-flow picture of docs/architecture.md (standard library only).

Run ``python docs/make_dataflow.py`` after changing a stage, folder or artifact below; the output is
deterministic and ``tests/test_docs.py`` checks that the committed SVG equals what this script draws.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

OUT = Path(__file__).with_name("dataflow.svg")

# (stage, package, what happens, artifact handed to the next stage)
STAGES = [
    ("1  Load", "hpd.bench", "TRAJECT-Bench public_data/ or the built-in benchmark → Task", "Task records"),
    ("2  Split", "hpd.bench.split", "leakage-safe R1 group split, verified", "split.json (train → replay, test → eval)"),
    ("3  Replay", "hpd.boundary", "reference driven through the harness; one Boundary per model call",
     "Boundary: native context, state snapshot, harness fork"),
    ("4  Compile", "hpd.document", "AutoProbe: state → ControlDocument (runtime / plan / oracle)",
     "boundaries/shard-*.jsonl (documents inside)"),
    ("5  Teach", "hpd.teacher", "K proposals → verify on a harness fork → rank → Target", "teach/targets.jsonl"),
    ("6  Views", "hpd.views", "T: context → action · I: + document → action · R: context → document",
     "ViewExample (prompt_ids, completion_ids)"),
    ("7  Train", "hpd.train", "one shared LoRA, exact T:I:R cycle of optimizer updates", "adapter/ + manifest.json"),
    ("8  Evaluate", "hpd.eval", "evaluate_variant: native rollouts in the harness (no document); Action-Acc",
     "metrics.json, tasks.jsonl"),
    ("9  Report", "hpd.report", "metric tables, plots, boundary inspector", "results.md, report.html, inspector.html"),
]

# (badge, package, what it is, which stages use it)
ENGINES = [
    ("harness", "hpd.harness", ["the Pi agent loop, boundary by boundary;", "fork(); checked against the real Pi (bridge/)"],
     [3, 4, 5, 8]),
    ("policy", "hpd.policy", ["THE renderer/parser (chat.py), models,", "hf / vLLM / OpenAI backends"], [5, 6, 8]),
    ("serve", "hpd.serve", ["OpenAI-compatible endpoint: the real Pi", "drives a trained checkpoint"], []),
    ("runs", "hpd.runfolder", ["atomic writes, config hash, the one manifest", "schema, resumable shard log"],
     [1, 2, 3, 5, 7, 8]),
    ("cli", "hpd.cli, hpd.demo", ["hpd <stage> commands; hpd demo runs", "every stage end to end on the CPU"], []),
]

W, TOP, ROW, BOX_H = 980, 40, 84, 58
SX, SW = 30, 580          # stage column
EX, EW = 650, 310         # engine column
STAGE_FILL, STAGE_LINE = "#e8f0fe", "#4a6fa5"
ENGINE_FILL, ENGINE_LINE = "#f4f4f4", "#888888"


def _text(x: float, y: float, s: str, size: int = 12, weight: str = "normal", family: str = "sans-serif",
          anchor: str = "start", style: str = "normal", fill: str = "#222") -> str:
    return (f'<text x="{x:g}" y="{y:g}" font-family="{family}" font-size="{size}" font-weight="{weight}" '
            f'font-style="{style}" text-anchor="{anchor}" fill="{fill}">{escape(s)}</text>')


def _box(x: float, y: float, w: float, h: float, fill: str, line: str, dash: str = "") -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="6" fill="{fill}" stroke="{line}"{d}/>'


def _stage_y(i: int) -> float:
    return TOP + 30 + i * ROW


def _stages() -> list[str]:
    out = []
    for i, (name, pkg, what, artifact) in enumerate(STAGES):
        y = _stage_y(i)
        out.append(_box(SX, y, SW, BOX_H, STAGE_FILL, STAGE_LINE))
        out.append(_text(SX + 12, y + 22, name, 14, "bold"))
        out.append(_text(SX + 120, y + 22, pkg, 13, family="monospace", fill="#1f3d7a"))
        out.append(_text(SX + 12, y + 44, what, 12))
        out.extend(_badges(i + 1, y))
        ay0, ay1 = y + BOX_H, y + ROW
        x = SX + 60
        if i + 1 < len(STAGES):
            out.append(f'<line x1="{x}" y1="{ay0:g}" x2="{x}" y2="{ay1 - 2:g}" stroke="#333" stroke-width="1.5" '
                       'marker-end="url(#arrow)"/>')
            out.append(_text(x + 14, ay0 + 17, artifact, 11, style="italic", fill="#444"))
        else:
            out.append(_text(SX + 12, ay0 + 18, "→ " + artifact, 11, style="italic", fill="#444"))
    return out


def _badges(stage: int, y: float) -> list[str]:
    """Grey tags in the stage box's top-right corner: the shared packages the stage runs on."""
    out, x = [], SX + SW - 10
    for badge, _pkg, _lines, used_by in reversed(ENGINES):
        if stage in used_by:
            w = 7 * len(badge) + 12
            x -= w
            out.append(_box(x, y + 8, w, 18, ENGINE_FILL, ENGINE_LINE))
            out.append(_text(x + w / 2, y + 21, badge, 11, family="monospace", anchor="middle", fill="#444"))
            x -= 6
    return out


def _engines() -> list[str]:
    out = [_text(EX, TOP + 18, "shared packages (grey tags)", 13, "bold", fill="#555")]
    step = (_stage_y(len(STAGES) - 1) - _stage_y(0)) / max(1, len(ENGINES) - 1)
    for j, (badge, pkg, lines, used_by) in enumerate(ENGINES):
        y = _stage_y(0) + j * step
        used = "used by: " + ", ".join(STAGES[s - 1][0].split()[1] for s in used_by) if used_by else ""
        h = 84 if used else 64
        out.append(_box(EX, y, EW, h, ENGINE_FILL, ENGINE_LINE))
        out.append(_text(EX + 12, y + 20, pkg, 13, "bold", family="monospace"))
        for k, ln in enumerate(lines + ([used] if used else [])):
            out.append(_text(EX + 12, y + 38 + 15 * k, ln, 11, style="italic" if ln is used else "normal"))
    return out


def render() -> str:
    h = _stage_y(len(STAGES) - 1) + BOX_H + 40
    head = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h:g}" viewBox="0 0 {W} {h:g}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#333"/></marker></defs>',
        f'<rect width="{W}" height="{h:g}" fill="white"/>',
        _text(SX, TOP + 4, "hpd: data flow (stage, package, what it hands on)", 16, "bold"),
    ]
    return "\n".join(head + _stages() + _engines() + ["</svg>"]) + "\n"


def main() -> None:
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
