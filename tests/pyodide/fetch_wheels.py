"""Download the Worker's wheels for the Pyodide test layer (run by ``scripts/dev.sh``).

Why a script: the wheels must match the Pyodide that npm installed (its Python version and
emscripten ABI, read from ``node_modules/pyodide/pyodide-lock.json``), be pinned and hash-checked
(``tests/pyodide/requirements.txt``), and be fetched only when either of those changes (a stamp
file, like the venv's). ``pip download --only-binary=:all: --platform ...`` takes pure-Python
wheels and pydantic-core's ``pyemscripten`` wheel from PyPI; nothing is installed in the venv.

    python tests/pyodide/fetch_wheels.py          # download if the stamp is stale
    python tests/pyodide/fetch_wheels.py --check  # exit 1 if a download is needed
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "tests" / "pyodide" / "requirements.txt"
PYODIDE_LOCK = ROOT / "node_modules" / "pyodide" / "pyodide-lock.json"
WHEELS = ROOT / ".cache" / "pyodide-wheels"

__all__ = ["WHEELS", "ensure_wheels", "pip_target", "stamp_path"]


def pip_target() -> list[str]:
    """pip's target options for the installed Pyodide (e.g. Python 3.14, pyemscripten_2026_0)."""
    if not PYODIDE_LOCK.is_file():
        raise SystemExit(f"{PYODIDE_LOCK} is missing: run `npm ci` first (scripts/dev.sh does)")
    info = json.loads(PYODIDE_LOCK.read_text(encoding="utf-8"))["info"]
    major, minor = info["python"].split(".")[:2]
    return [
        "--platform",
        f"pyemscripten_{info['abi_version']}_{info['arch']}",
        "--python-version",
        f"{major}.{minor}",
        "--implementation",
        "cp",
        "--abi",
        f"cp{major}{minor}",
    ]


def stamp_path() -> Path:
    digest = hashlib.sha256(REQUIREMENTS.read_bytes() + " ".join(pip_target()).encode())
    return WHEELS / f".installed-{digest.hexdigest()[:16]}"


def ensure_wheels(check_only: bool = False) -> bool:
    """True when the wheels are up to date (downloading them unless ``check_only``)."""
    if stamp_path().is_file():
        return True
    if check_only:
        return False
    WHEELS.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="pyodide-wheels-", dir=WHEELS.parent))
    try:
        command = [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--only-binary=:all:", "--no-deps", *pip_target(),
            "--dest", str(tmp), "--requirement", str(REQUIREMENTS),
        ]  # fmt: skip
        subprocess.run(command, check=True)
        if WHEELS.exists():
            shutil.rmtree(WHEELS)
        tmp.rename(WHEELS)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    stamp_path().touch()
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check the stamp")
    args = parser.parse_args()
    if ensure_wheels(check_only=args.check):
        return 0
    print(f"{WHEELS} is stale: run scripts/dev.sh test (or {Path(__file__).name})", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
