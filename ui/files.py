"""Files a lead downloads from the studio (snapshot exports, evaluation reports), handed to Gradio as copies.

Gradio serves what `launch(allowed_paths=...)` names to every signed-in user, whatever their role, so the exports
and reports folders are not named there. A lead-only handler hands out a copy instead: `served_copy` puts it in a
folder of the system temp directory named by the file's content hash, and Gradio moves it into its own cache
under another content-hash name that no one can guess without the content.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from relabel.common.atomic import atomic_writer

SERVE_DIR = Path(tempfile.gettempdir()) / "relabel-studio-files"


def served_copy(path: str | Path) -> str:
    """A copy of `path` that Gradio may hand to the browser that asked for it (same name, content-addressed)."""
    source = Path(path)
    digest = hashlib.sha256()
    with source.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    target = SERVE_DIR / digest.hexdigest()[:32] / source.name
    if not target.exists():
        with source.open("rb") as f, atomic_writer(target, private=True) as out:
            shutil.copyfileobj(f, out)
    return str(target)
