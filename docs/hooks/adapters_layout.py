"""The adapters' layout, drawn from the import-linter contracts in ``pyproject.toml``.

``python docs/hooks/adapters_layout.py`` rewrites the drawing in ``docs/architecture.md``
(between the ``adapters-layout`` markers); ``--check`` fails when the committed drawing
is not what the contracts say now (``tests/test_adapters_layout.py`` runs the same
check). Each layer of the adapters' ``layers`` contract is a row of boxes, one per
package, and may import any row below it; the dialects' ``independence`` contract and
the ``forbidden`` contracts are named under the drawing.
"""

from __future__ import annotations

import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- adapters-layout: begin (python docs/hooks/adapters_layout.py) -->"
END = "<!-- adapters-layout: end -->"
CONTAINER = "codexcore.adapters"
WIDTH = 92


def contracts(pyproject: Path = ROOT / "pyproject.toml") -> list[dict[str, Any]]:
    config = tomllib.loads(pyproject.read_text())
    found: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return found


def _short(module: str) -> str:
    return module.removeprefix(CONTAINER + ".")


def _boxes_of(layer: str) -> list[str]:
    """A layer's packages; private modules of one package (``jsonrpc._machine : ...``)
    are drawn as that package's one box (``jsonrpc/_*``)."""
    names: list[str] = []
    for entry in layer.replace("|", ":").split(":"):
        name = entry.strip()
        parent, _, last = name.rpartition(".")
        if last.startswith("_"):
            name = f"{parent}/_*"
        if name not in names:
            names.append(name)
    return names


def _row(names: list[str], marked: set[str]) -> list[str]:
    """Boxes side by side, in as many rows of boxes as the width needs."""
    labels = [f" {name}{' *' if name in marked else ''} " for name in names]
    rows: list[list[str]] = [[]]
    for label in labels:
        if rows[-1] and sum(len(x) + 3 for x in rows[-1]) + len(label) + 2 > WIDTH - 2:
            rows.append([])
        rows[-1].append(label)
    lines: list[str] = []
    for row in rows:
        lines.append(" ".join("┌" + "─" * len(label) + "┐" for label in row))
        lines.append(" ".join("│" + label + "│" for label in row))
        lines.append(" ".join("└" + "─" * len(label) + "┘" for label in row))
    return lines


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, subsequent_indent="    ", break_on_hyphens=False)


def drawing(found: list[dict[str, Any]] | None = None) -> str:
    """The text drawing of the adapters' contracts."""
    found = contracts() if found is None else found
    layers = next(c for c in found if c["type"] == "layers" and c.get("containers") == [CONTAINER])
    titles = layers["name"].split(": ", 1)[1].split(" > ")
    independent = [c for c in found if c["type"] == "independence"]
    marked = {_short(m) for c in independent for m in c["modules"]}
    lines: list[str] = []
    for index, (layer, title) in enumerate(zip(layers["layers"], titles, strict=True)):
        row = _row(_boxes_of(layer), marked)
        lines.append(title)
        lines.extend("  " + line for line in row)
        if index < len(layers["layers"]) - 1:
            lines.append("  │ may import any row below")
            lines.append("  ▼")
    lines.append("  │")
    lines.append("  ▼ the engine's public API (codexcore.engine, codexcore.protocol)")
    lines.append("")
    for contract in independent:
        names = ", ".join(_short(m) for m in contract["modules"])
        lines.extend(_wrapped(f"* independent of each other (no import either way): {names}"))
    for contract in found:
        if contract["type"] != "forbidden" or not contract["source_modules"][0].startswith(
            CONTAINER
        ):
            continue
        sources = ", ".join(_short(m) for m in contract["source_modules"])
        forbidden = ", ".join(_short(m) for m in contract["forbidden_modules"])
        lines.extend(_wrapped(f"{sources} ──✗──▶ {forbidden}"))
    width = max(len(line) for line in lines)
    if width > WIDTH:
        raise ValueError(f"the drawing is {width} characters wide; keep rows under {WIDTH}")
    return "\n".join(["```text", *(line.rstrip() for line in lines), "```"])


def page_with(drawn: str, text: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + drawn + "\n" + text[end:]


def main(argv: list[str]) -> int:
    text = PAGE.read_text()
    wanted = page_with(drawing(), text)
    if "--check" in argv:
        if wanted != text:
            print(f"{PAGE} is stale: run python docs/hooks/adapters_layout.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
