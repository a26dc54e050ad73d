"""Options several commands share, read back from the parsed arguments: the gate's settings,
the reranker."""

from __future__ import annotations

import argparse

from kr.gate.compare import parse_tolerances
from kr.gate.runs import GateSettings
from kr.help_center import extra_sets_from_env
from kr.rerankers import reranker_from_spec
from router.ports import Reranker

__all__ = ["gate_settings", "reranker"]


def gate_settings(args: argparse.Namespace) -> GateSettings:
    """``--golden``, ``--extra`` (then the folders of ``$KR_EXTRA_SETS`` not already named),
    ``--split``, ``--tolerance`` and ``--today`` (``kr build``, ``kr publish``, ``kr gate``)."""
    named = tuple(args.extra)
    from_env = tuple(p for p in extra_sets_from_env() if p not in named)
    return GateSettings(
        tolerances=parse_tolerances(args.tolerance),
        golden=args.golden,
        extra=named + from_env,
        split=args.split,
        today=args.today,
    )


def reranker(args: argparse.Namespace) -> Reranker | None:
    """``--reranker`` (``kr query``, ``kr serve``, ``kr eval``): see :mod:`kr.rerankers`."""
    return reranker_from_spec(getattr(args, "reranker", None))
