"""The one exception every dataset reader raises on bad input."""
from __future__ import annotations

import os
from pathlib import Path


class DatasetFormatError(ValueError):
    """A dataset file is missing or does not follow its format.

    The message always starts with the file, then the line number (``path:LINE``) and/or
    the field (``[annotations[3].bbox]``) where the problem was found, e.g.
    ``Sentences/42.txt:3: unbalanced brackets: ']' outside a phrase``.
    """

    def __init__(self, path: str | os.PathLike, message: str, *, line: int | None = None,
                 field: str | None = None) -> None:
        self.path = Path(path)
        self.line = line
        self.field = field
        self.problem = message
        where = str(self.path) + (f":{line}" if line is not None else "")
        where += f" [{field}]" if field else ""
        super().__init__(f"{where}: {message}")


    def __reduce__(self):  # keep the keyword-only fields when pickled (DataLoader workers)
        return (_rebuild, (type(self), self.path, self.problem, self.line, self.field))


def _rebuild(cls: type, path: Path, problem: str, line: int | None,
             field: str | None) -> DatasetFormatError:
    return cls(path, problem, line=line, field=field)
