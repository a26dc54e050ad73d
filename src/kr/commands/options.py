"""Options several commands share, read back from the parsed arguments: the gate's settings."""

from __future__ import annotations

import argparse

from kr.gate.compare import parse_tolerances
from kr.gate.runs import GateSettings

__all__ = ["gate_settings"]


def gate_settings(args: argparse.Namespace) -> GateSettings:
    """``--golden``, ``--extra``, ``--split``, ``--tolerance`` and ``--today`` (``kr build``,
    ``kr publish``, ``kr gate``)."""
    return GateSettings(
        tolerances=parse_tolerances(args.tolerance),
        golden=args.golden,
        extra=tuple(args.extra),
        split=args.split,
        today=args.today,
    )
