"""Where the codist source checkout is (the folder with pyproject.toml, Snakefile and analysis/), for
code that runs outside it: the analysis notebooks, opened in Jupyter or executed by jupytext or
nbclient from any folder, put its analysis/ on sys.path through `use_analysis()`."""
from __future__ import annotations

import os
import sys
from pathlib import Path

MARKERS = ("pyproject.toml", "Snakefile", "analysis/notebook_support.py")


def is_checkout(folder: Path) -> bool:
    return all((folder / m).is_file() for m in MARKERS)


def project_root(start: str | os.PathLike | None = None) -> Path:
    """$CODIST_ROOT if set; else the nearest checkout at or above `start` (default: the working
    directory, which is a notebook's own folder in Jupyter and under `jupytext --execute`); else the
    checkout this package is installed from (an editable install, as env/install.sh makes)."""
    if os.environ.get("CODIST_ROOT"):
        root = Path(os.environ["CODIST_ROOT"]).resolve()
        if not is_checkout(root):
            raise FileNotFoundError(f"$CODIST_ROOT={root}: not a codist checkout (expected {', '.join(MARKERS)})")
        return root
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if is_checkout(folder):
            return folder
    installed = Path(__file__).resolve().parents[2]
    if is_checkout(installed):
        return installed
    raise FileNotFoundError(f"no codist checkout at or above {here}, and codist is installed from {installed}, "
                            f"not a checkout: set CODIST_ROOT to the checkout's folder")


def use_analysis(start: str | os.PathLike | None = None) -> Path:
    """The checkout's analysis/ first on sys.path (so `import notebook_support` finds it); returns
    the checkout."""
    root = project_root(start)
    analysis = str(root / "analysis")
    if analysis in sys.path:
        sys.path.remove(analysis)
    sys.path.insert(0, analysis)
    return root
