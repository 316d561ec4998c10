"""Chapter 0's oracle as a committed checkpoint: trained once to convergence by
``data_scripts/train_stage_oracle.py``, read back at every build.

Training the oracle to convergence takes longer than the book's budget allows a chapter
(several minutes of the 2-core CPU); like the toy CLIPs, it is trained by a script whose
command, selection record (every validation curve) and held-out task scores travel with
the weights. Chapter 0 recomputes the scores on the same test scenes and stops if they
differ from the record (:func:`fgclip.studies.stage_report.check_recorded`).
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..fileio import atomic_write_stream
from ..paths import project_home
from ..toyworld import COLORS
from ..train.selection import Selection
from .stage import OracleNet, new_oracle

ORACLE_NAME = "stage-oracle"
FIELDS = ("state_dict", "selection", "categories", "colours", "image_size", "command", "test_metrics")


def oracle_path() -> Path:
    """The committed oracle: ``checkpoints/stage-oracle.pt`` in the project's home."""
    return project_home() / "checkpoints" / f"{ORACLE_NAME}.pt"


def save_oracle(path: str | Path, oracle: OracleNet, selection: Selection, categories: tuple[str, ...],
                image_size: int, command: str, test_metrics: dict[str, float], **info) -> Path:
    """Write the oracle's weights with what made it, atomically (a temporary file, then a rename)."""
    record = {"state_dict": {k: v.detach().cpu() for k, v in oracle.state_dict().items()},
              "selection": selection.to_dict(), "categories": list(categories), "colours": list(COLORS),
              "image_size": image_size, "command": command, "test_metrics": test_metrics, **info}
    return atomic_write_stream(path, lambda f: torch.save(record, f))


def load_oracle(path: str | Path, categories: tuple[str, ...], image_size: int
                ) -> tuple[OracleNet, Selection, dict]:
    """-> (oracle in eval mode, its selection record, the rest of the record); a clear error
    naming the file when it is missing, incomplete, or made for another world."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no committed oracle; train one with data_scripts/train_stage_oracle.py "
                                f"or run chapter 0 with oracle='train'")
    record = torch.load(path, map_location="cpu", weights_only=False)
    missing = [k for k in FIELDS if k not in record]
    if missing:
        raise ValueError(f"{path}: the oracle's record lacks {', '.join(missing)}")
    for field, want in (("categories", list(categories)), ("colours", list(COLORS)), ("image_size", image_size)):
        if record[field] != want:
            raise ValueError(f"{path}: the oracle was trained for {field}={record[field]!r}, this world has "
                             f"{want!r}; retrain it (data_scripts/train_stage_oracle.py) or use oracle='train'")
    model = new_oracle(len(categories))
    model.load_state_dict(record["state_dict"])
    info = {k: v for k, v in record.items() if k not in ("state_dict", "selection")}
    return model.eval(), Selection.from_dict(record["selection"]), info
