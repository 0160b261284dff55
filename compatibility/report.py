"""What the compatibility run reports: one `Result` per env, notes drawn from a
`check --json` report and an eval's trace, and the markdown table."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Result",
    "all_user_texts",
    "first_user_text",
    "reward_of",
    "rounded",
    "short_error",
    "summarize_check",
    "table",
]


@dataclass
class Result:
    env: str
    check: str = "-"
    eval: str = "-"
    notes: list[str] = field(default_factory=list)
    check_report: dict[str, Any] | None = None
    eval_summary: dict[str, Any] | None = None
    leftovers: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "check": self.check,
            "eval": self.eval,
            "notes": self.notes,
            "eval_summary": self.eval_summary,
            "leftovers": self.leftovers,
            "check_report": self.check_report,
        }


def summarize_check(report: dict[str, Any]) -> list[str]:
    notes = []
    if report.get("launch_s") is not None:
        notes.append(f"launch {report['launch_s']:.1f}s")
    if docker := report.get("docker"):
        build = docker.get("build")
        if docker.get("build_s") is not None:
            build = f"{build} in {docker['build_s']:.0f}s"
        notes.append(
            f"image {build}, container ready in {docker.get('ready_s')}s as "
            f"{docker.get('user')} on {docker.get('network')}"
        )
    app = report.get("app") or {}
    if app.get("app"):
        source = app.get("source") or ""
        source = "project.scripts" if "project.scripts" in source else source
        notes.append(f"app `{app['app']}` ({source})")
    for failed in app.get("failed") or ():
        notes.append(f"app `{failed['app']}` failed: {failed['error'][:120]}")
    if any("gradio" in w for w in report.get("warnings") or ()):
        notes.append("imports gradio without declaring it: relaunched with it")
    action = report.get("action") or {}
    if report.get("tools") is not None:
        names = [t["name"] for t in report["tools"]]
        notes.append(f"MCP, {len(names)} tools: {', '.join(names[:8])}")
    elif action.get("fields"):
        fields = [
            f"{f['name']}{'' if f['required'] else '?'}: {f['type']}"
            for f in action["fields"]
        ]
        notes.append("action " + ", ".join(fields)[:200])
    reset = report.get("reset") or {}
    # The first turn as the model sees it (`turn`; `opening` in older versions).
    opening = reset.get("turn", reset.get("opening"))
    if isinstance(opening, str):
        body = re.split(r"\n*(Reply with one action|Act by calling one tool)", opening)[
            0
        ]
        if not body.strip():
            notes.append("opening observation EMPTY")
        notes.append(f"opening {len(opening)} chars")
        if "structured_content" in opening:
            notes.append("opening shows raw `structured_content`")
    step = report.get("step")
    if step:
        reward = rounded(step.get("reward"))
        notes.append(f"step reward {reward} done {step.get('done')}")
        if "structured_content" in str(step.get("turn", "")):
            notes.append("step turn shows raw `structured_content`")
    sessions = report.get("sessions") or {}
    if sessions.get("status") == "refused":
        notes.append(f"max {sessions.get('max_sessions')} sessions")
    elif sessions.get("status") == "unknown":
        notes.append(f"session probe failed: {str(sessions.get('error'))[:160]}")
    seed = report.get("seed_check") or {}
    if seed.get("status") == "differs":
        notes.append("same seed differs: " + ", ".join(seed.get("differences", [])))
    for warning in report.get("warnings") or ():
        if "seed" not in warning:
            notes.append(f"warning: {warning[:160]}")
    return notes


def short_error(failure: dict[str, Any]) -> str:
    error = failure.get("error") or ""
    # The server's output (its traceback) is in the check report; the note keeps the
    # error itself.
    error = error.split("\nthe env server's output ends with:")[0]
    first = error.split("; its output ends with:")[0]
    lines = [ln for ln in error.splitlines() if ln.strip()]
    last = lines[-1].strip() if lines else ""
    text = first[:400]
    if last and last not in text:
        text += f" … {last[:240]}"
    return f"{failure.get('stage')}: {text}"


def rounded(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def _texts(trace: dict[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("role") == "user":
                content = node.get("content")
                if isinstance(content, str):
                    found.append(content)
                elif isinstance(content, list):
                    found.append(
                        "\n".join(
                            p.get("text", "") for p in content if isinstance(p, dict)
                        )
                    )
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(trace.get("calls") or trace)
    return found


def reward_of(trace: dict[str, Any]) -> Any:
    """The trace's `openenv_reward`: a number on 0.2, `{"score": ...}` on 0.4."""
    reward = (trace.get("rewards") or {}).get("openenv_reward")
    return reward.get("score") if isinstance(reward, dict) else reward


def first_user_text(trace: dict[str, Any]) -> str | None:
    texts = _texts(trace)
    return texts[0] if texts else None


def all_user_texts(trace: dict[str, Any]) -> list[str]:
    seen: list[str] = []
    for text in _texts(trace):
        if text not in seen:
            seen.append(text)
    return seen


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(results: list[Result]) -> str:
    lines = ["| env | check | eval | notes |", "|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.env} | {r.check} | {r.eval} | {cell('; '.join(r.notes))} |")
    return "\n".join(lines)
