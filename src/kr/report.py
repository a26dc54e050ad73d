"""Evaluation reports on disk: ``metrics.json`` (machines), ``report.md`` and PNG plots (people).

Why files under ``reports/<set>/``: quality is measured on every index change (PRD §40); a
report committed next to the code shows what a change did, and the JSON is what tools diff.
Plots use matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kr.evaluation import CALIBRATION_BINS, EvalReport

__all__ = [
    "DEFAULT_REPORTS_DIR",
    "MACHINE_NOTE",
    "RANK_BUCKETS",
    "machine",
    "render_markdown",
    "write_report",
]

DEFAULT_REPORTS_DIR = Path("reports")
RANK_BUCKETS = ("1", "2", "3", "4-10", "11-100", "not found", "abstained")
MACHINE_NOTE = "timings from one run on a shared, noisy machine: compare ratios within a run"
_HEADLINE = ("hit@1", "hit@3", "mrr", "ndcg@10", "recall@10", "recall@100")
_CATEGORY_METRICS = ("hit@1", "hit@3", "mrr", "ndcg@10")
_PATH_METRICS = ("hit@1", "mrr", "ndcg@10")
MISS_RESULTS_SHOWN = 2  # results listed per missed query
CELL_CHARS = 70  # a table cell is cut to this many characters


def machine() -> dict[str, Any]:
    """Where the figures were measured (they mean little without it)."""
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": platform.platform(terse=True),
        "cpus": os.cpu_count(),
        "note": MACHINE_NOTE,
    }


def write_report(report: EvalReport, folder: Path) -> Path:
    """Write ``metrics.json``, ``report.md`` and the plots into ``folder``; returns the .md path."""
    folder.mkdir(parents=True, exist_ok=True)
    payload = report.to_json()
    payload["machine"] = machine()
    (folder / "metrics.json").write_text(
        json.dumps(payload, ensure_ascii=False, indent=1, default=_jsonable) + "\n",
        encoding="utf-8",
    )
    plots = _plots(report, folder)
    markdown = folder / "report.md"
    markdown.write_text(render_markdown(report, plots), encoding="utf-8")
    return markdown


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | tuple):
        return list(value)
    return str(value)


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and value > 1):
        return f"{int(value):,}"
    return f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def render_markdown(report: EvalReport, plots: Sequence[str] = ()) -> str:
    lines = [*_summary(report), *_abstention(report.overall), *_risk(report.overall)]
    lines += _per_category(report, plots)
    lines += [*_serving_paths(report), *_latency(report.operations, plots)]
    if "ranks.png" in plots:
        lines += ["## Rank of the first expected id", "", "![ranks](ranks.png)", ""]
    lines += _misses(report)
    return "\n".join(lines)


def _summary(report: EvalReport) -> list[str]:
    overall = report.overall
    lines = [f"# Evaluation: {report.name}", ""]
    facts = [f"- {key.replace('_', ' ')}: {_fact(value)}" for key, value in report.info.items()]
    lines += [*facts, f"- queries: {overall['n']} ({overall['judged']} with expected ids)", ""]
    lines += ["## Ranking quality (ranx)", ""]
    present = [m for m in _HEADLINE if overall.get(m) is not None]
    return lines + _table(present, [[_num(overall[m]) for m in present]])


def _abstention(overall: Mapping[str, Any]) -> list[str]:
    rates = [
        _num(overall["abstention_acc"]),
        _num(overall["abstention_precision"]),
        _num(overall["abstention_recall"]),
        _pct(overall["abstention_rate"]),
    ]
    lines = [
        "",
        "## Abstention",
        "",
        *_table(["accuracy", "precision", "recall", "rate"], [rates]),
        "",
        "Precision: of the queries the router declined, the share it should have declined; "
        "recall: of the queries it should have declined, the share it did. A set where every "
        "query is answerable (BEIR) has neither: any abstention there is a false one, and the "
        "rate is the false-abstention rate.",
        "",
    ]
    if overall.get("intent_acc") is not None or overall.get("forbidden_leaks"):
        lines += [
            f"Intent accuracy {_num(overall.get('intent_acc'))}; "
            f"forbidden documents returned: {overall.get('forbidden_leaks', 0)}.",
            "",
        ]
    return lines


def _risk(overall: Mapping[str, Any]) -> list[str]:
    """False answers, false abstentions and the calibration of the reported confidence."""
    lines = [
        "## False answers and calibration",
        "",
        *_table(
            ["false answers", "false abstention", "fact value acc.", "ECE (confidence)"],
            [
                [
                    _num(overall.get("false_answer_rate")),
                    _num(overall.get("false_abstention")),
                    _num(overall.get("fact_value_acc")),
                    _num(overall.get("ece")),
                ]
            ],
        ),
        "",
        "False answers: the share of all queries answered wrongly (a query to decline "
        "answered, a wrong first result, or a fact question whose answer does not state the "
        "fact's value); false abstention: the share of answerable queries declined. ECE: the "
        "expected calibration error of the confidence the router reports against whether the "
        f"served first result is relevant, over {CALIBRATION_BINS} equal-width bins.",
        "",
    ]
    bins = overall.get("reliability") or []
    if bins:
        rows = [
            [
                f"{b['low']:.1f}–{b['high']:.1f}",
                str(b["count"]),
                _num(b["confidence"]),
                _num(b["observed"]),
            ]
            for b in bins
        ]
        lines += [*_table(["confidence", "n", "mean reported", "top-1 relevant"], rows), ""]
    return lines


def _per_category(report: EvalReport, plots: Sequence[str]) -> list[str]:
    lines: list[str] = []
    if len(report.per_category) > 1:
        lines += ["## Per category", ""]
        header = ["category", "n", *_CATEGORY_METRICS, "abst. P", "abst. R", "passed"]
        rows = []
        for name, m in report.per_category.items():
            passed = sum(o.passed for o in report.outcomes if o.category == name)
            cells = [_num(m.get(k)) for k in _CATEGORY_METRICS]
            abst = [_num(m["abstention_precision"]), _num(m["abstention_recall"])]
            rows.append([name, str(m["n"]), *cells, *abst, f"{passed}/{m['n']}"])
        lines += [*_table(header, rows), ""]
    if "categories.png" in plots:
        lines += ["![per category](categories.png)", ""]
    return lines


def _serving_paths(report: EvalReport) -> list[str]:
    ops = report.operations
    rates = ["cache_hit_rate", "exact_match_rate", "bm25_only_rate", "hybrid_rate"]
    rates += ["abstention_rate", "vector_fallback_rate"]
    lines = ["## Serving paths", ""]
    lines += _table(
        ["cache hit", "exact match", "BM25 only", "hybrid", "abstained", "vector fallback ran"],
        [[_pct(ops[rate]) for rate in rates]],
    )
    lines += [
        "",
        "The first five columns are the serving paths (they add up to 100 %); the vector "
        "fallback also runs on some queries that end abstained.",
    ]
    lines += ["", "Quality by path:", ""]
    path_rows = [
        [path, str(m["n"]), *[_num(m.get(k)) for k in _PATH_METRICS]]
        for path, m in report.by_path.items()
    ]
    return [*lines, *_table(["path", "n", "hit@1", "MRR", "nDCG@10"], path_rows), ""]


def _latency(ops: Mapping[str, Any], plots: Sequence[str]) -> list[str]:
    latency = ops["latency_ms"]
    lines = [
        "## Latency (ms, from each response's trace)",
        "",
        f"{MACHINE_NOTE.capitalize()}. Measured in-process with the latency budget lifted (so "
        f"quality does not depend on load); {_pct(ops['over_latency_budget_rate'])} of the "
        f"queries took longer than the {ops['latency_budget_ms']:.0f} ms budget. The cascade "
        "ran for the number of results each query asked for (golden: 10, BEIR: 100, where "
        "building the context of 100 passages dominates; bench/retrieval_quality.py times the "
        "served top-K).",
        "",
    ]
    rows = [["total", *_pcts(latency["total"])]]
    rows += [[f"path: {p}", *_pcts(v)] for p, v in latency["paths"].items()]
    rows += [[f"stage: {s}", *_pcts(v)] for s, v in latency["stages"].items()]
    lines += [*_table(["", "n", "p50", "p95"], rows), ""]
    if "latency.png" in plots:
        lines += ["![latency per stage](latency.png)", ""]
    return lines


def _misses(report: EvalReport) -> list[str]:
    failures = report.failures
    if not failures:
        return []
    shown = failures[: report.failures_listed]
    rows = [
        [
            f["id"],
            f["category"],
            _cell(f["query"]),
            _cell(", ".join(f["expected"])) or "(abstain)",
            "abstained" if f["abstained"] else str(f["rank"] or "–"),
            _cell(", ".join(f["got"][:MISS_RESULTS_SHOWN])),
        ]
        for f in shown
    ]
    header = ["id", "category", "query", "expected", "rank", "got"]
    return [f"## Misses ({len(failures)}; first {len(shown)})", "", *_table(header, rows), ""]


def _fact(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_fact(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:,.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _cell(text: str, limit: int = CELL_CHARS) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pcts(stats: Mapping[str, Any]) -> list[str]:
    return [str(stats["n"]), _num(stats["p50"], 2), _num(stats["p95"], 2)]


def _rank_bucket(rank: int | None, abstained: bool) -> str:
    if abstained:
        return "abstained"
    if rank is None:
        return "not found"
    if rank <= 3:
        return str(rank)
    return "4-10" if rank <= 10 else "11-100"


def _plots(report: EvalReport, folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    categories = {name: m for name, m in report.per_category.items() if m.get("hit@1") is not None}
    if categories:
        fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(categories) + 2), 4))
        width = 0.8 / len(_CATEGORY_METRICS)
        for i, metric in enumerate(_CATEGORY_METRICS):
            values = [categories[c].get(metric) or 0.0 for c in categories]
            ax.bar([x + i * width for x in range(len(categories))], values, width, label=metric)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(categories))])
        ax.set_xticklabels(list(categories), rotation=30, ha="right")
        ax.set_ylim(0, 1.2)  # headroom for the legend above the bars
        ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.set_title(f"{report.name}: ranking quality per category")
        ax.legend(fontsize="small", ncols=len(_CATEGORY_METRICS), loc="upper center")
        _save(fig, folder / "categories.png", plt)
        written.append("categories.png")

    stages = report.operations["latency_ms"]["stages"]
    if stages:
        names = list(stages)
        fig, ax = plt.subplots(figsize=(7, 0.35 * len(names) + 1.5))
        positions = range(len(names))
        ax.barh([y + 0.2 for y in positions], [stages[n]["p50"] for n in names], 0.4, label="p50")
        ax.barh([y - 0.2 for y in positions], [stages[n]["p95"] for n in names], 0.4, label="p95")
        ax.set_yticks(list(positions))
        ax.set_yticklabels(names)
        ax.invert_yaxis()
        ax.set_xscale("log")  # stages span three orders of magnitude
        ax.set_xlabel("ms, log scale (stages that ran)")
        ax.set_title(f"{report.name}: latency per stage")
        ax.legend(fontsize="small")
        _save(fig, folder / "latency.png", plt)
        written.append("latency.png")

    judged = [o for o in report.outcomes if o.judged]
    if judged:
        counts = dict.fromkeys(RANK_BUCKETS, 0)
        for outcome in judged:
            counts[_rank_bucket(outcome.rank, outcome.abstained)] += 1
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.bar(list(counts), list(counts.values()), color="#4c72b0")
        ax.set_ylabel("queries")
        ax.set_title(f"{report.name}: rank of the first expected id")
        _save(fig, folder / "ranks.png", plt)
        written.append("ranks.png")
    return written


def _save(fig: Any, path: Path, plt: Any) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
