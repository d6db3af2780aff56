"""Every extension type a `.pxd` declares lists exactly the attributes its Python class has.

A `.pxd` beside a module turns the module's classes into extension types in the compiled build; an attribute
the `.pxd` forgets is an AttributeError there and nowhere else, and one it keeps after the class dropped it is
dead weight in every instance. Read from the sources, so it holds whichever build is installed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("capture", "dissector", "kdissect", "payloads")

_CLASS = re.compile(r"^cdef class (\w+)\b")
_FIELDS = re.compile(r"^\s+cdef\s+(?:public\s+|readonly\s+)?([^()=]+)$")


def declared(pxd: Path) -> dict[str, set[str]]:
    """Class name -> the attribute names its `cdef class` block declares."""
    classes: dict[str, set[str]] = {}
    current = None
    for line in pxd.read_text().splitlines():
        line = line.split("#")[0].rstrip()
        start = _CLASS.match(line)
        if start:
            current = classes.setdefault(start.group(1), set())
        elif line and not line[0].isspace():
            current = None
        elif current is not None:
            fields = _FIELDS.match(line)
            if fields:
                # "object a, b" / "unsigned int index, count": the first item carries the C type
                first, *rest = (part.strip() for part in fields.group(1).split(","))
                current.update([first.split()[-1], *rest])
    return classes


def assigned(cls: ast.ClassDef) -> set[str]:
    """The instance attributes a Python class has: dataclass fields, __slots__, and every self.X assigned."""
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if "ClassVar" not in ast.unparse(node.annotation):
                names.add(node.target.id)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                  for t in node.targets):
            names.update(e.value for e in node.value.elts)
    for node in ast.walk(cls):
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                    names.add(sub.attr)
    return names


def pxd_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).glob("**/*.pxd") if declared(p))


@pytest.mark.parametrize("pxd", pxd_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pxd_lists_the_class_attributes(pxd: Path) -> None:
    module = ast.parse(pxd.with_suffix(".py").read_text())
    classes = {node.name: node for node in module.body if isinstance(node, ast.ClassDef)}
    for name, attrs in declared(pxd).items():
        assert name in classes, f"{pxd.name} declares class {name}, which {pxd.stem}.py does not define"
        have = assigned(classes[name])
        assert attrs == have, (f"{pxd.name}: {name} declares {sorted(attrs - have)} that the class never sets, "
                               f"and misses {sorted(have - attrs)}")


def test_the_parser_reads_every_declared_class() -> None:
    # A .pxd reformatted out of the parser's reach would make the test above vacuous.
    found = {name for p in pxd_files() for name in declared(p)}
    assert {"Request", "Response", "Flow", "RowBuilder", "Dropping"} <= found
    assert len(found) >= 40
