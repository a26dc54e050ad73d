#!/usr/bin/env python3
"""Compile a knowledge folder into a package and publish it to the local state.

Same code as ``kr build`` (usage: ``python scripts/build_index.py KNOWLEDGE_DIR [--state DIR]
[--strict] [--out DIR]``).
"""

from __future__ import annotations

import sys

from kr.cli import main

if __name__ == "__main__":
    sys.exit(main(["build", *sys.argv[1:]]))
