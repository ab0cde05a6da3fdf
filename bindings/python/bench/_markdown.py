"""The Markdown table the benchmark scripts print their figures as."""

from __future__ import annotations

from typing import Iterable, Sequence


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """Prints ``headers`` and then each row (its cells already formatted, or as ``str``
    gives them) as a Markdown table."""
    print("| " + " | ".join(headers) + " |")
    print("|" + "---|" * len(headers))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
