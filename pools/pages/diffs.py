"""Side-by-side diff of two revisions' documents, as rows the template escapes like any other text
(difflib.HtmlDiff would hand us HTML with user text inside, which we would have to trust)."""

import difflib
import json
from dataclasses import dataclass
from itertools import zip_longest

from pools.models import ConfigRevision


@dataclass(frozen=True, slots=True)
class DiffRow:
    kind: str  # equal | replace | delete | insert
    left_number: int | None
    left: str
    right_number: int | None
    right: str


def document_lines(revision: ConfigRevision | None) -> list[str]:
    """The same text `config diff` compares: the document as indented JSON; nothing when deleted."""
    if revision is None or revision.action == ConfigRevision.Action.DELETE:
        return []
    return json.dumps(revision.document, indent=2).splitlines()


def side_by_side(left: list[str], right: list[str], context: int | None = None) -> list[DiffRow]:
    """Rows of both sides aligned; with `context`, equal runs are cut to that many lines around changes
    (a cut is a row of kind "skip")."""
    rows: list[DiffRow] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=left, b=right, autojunk=False).get_opcodes():
        if tag == "equal":
            block = [DiffRow("equal", i1 + k + 1, left[i1 + k], j1 + k + 1, right[j1 + k]) for k in range(i2 - i1)]
            rows.extend(_trim(block, context, first=not rows, last=i2 == len(left)) if context is not None else block)
            continue
        for k, (a, b) in enumerate(zip_longest(left[i1:i2], right[j1:j2])):
            kind = tag if tag != "replace" else ("replace" if a is not None and b is not None else
                                                 "delete" if b is None else "insert")
            rows.append(DiffRow(kind, i1 + k + 1 if a is not None else None, a or "",
                                j1 + k + 1 if b is not None else None, b or ""))
    return rows


def _trim(block: list[DiffRow], context: int, *, first: bool, last: bool) -> list[DiffRow]:
    keep_head = 0 if first else context
    keep_tail = 0 if last else context
    if len(block) <= keep_head + keep_tail + 1:
        return block
    skipped = len(block) - keep_head - keep_tail
    return [*block[:keep_head], DiffRow("skip", None, f"{skipped} unchanged lines", None, ""),
            *block[len(block) - keep_tail:]]


def changed(rows: list[DiffRow]) -> bool:
    return any(row.kind not in ("equal", "skip") for row in rows)
