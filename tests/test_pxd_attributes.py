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


# -- @cython.locals ----------------------------------------------------------------------------------
# A local typed for a function that no longer has it is silently ignored by Cython: the type, and the
# speed it was there for, is gone without a word. So is every local of a function renamed or removed.

_DEF = re.compile(r"^(\s*)c(?:p)?def\b(?!\s+class\b).*?(\w+)\(")


def _locals_call(text: str) -> set[str]:
    """The names of ``@cython.locals(a=..., b=...)``, its arguments given as text."""
    call = ast.parse(f"f({text})", mode="eval").body
    assert isinstance(call, ast.Call)
    return {kw.arg for kw in call.keywords if kw.arg}


def typed_locals(pxd: Path) -> list[tuple[str, set[str]]]:
    """(function, its @cython.locals names) for each decorated declaration: "f" or "Class.f"."""
    out: list[tuple[str, set[str]]] = []
    lines = [line.split("#")[0].rstrip() for line in pxd.read_text().splitlines()]
    current = None
    pending: set[str] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        start = _CLASS.match(line)
        if start:
            current = start.group(1)
        elif line and not line[0].isspace():
            current = None
        stripped = line.strip()
        if stripped.startswith("@cython.locals("):
            text, depth = "", 0
            while True:      # the decorator's arguments, over as many lines as they take
                text += lines[i].strip() + " "
                depth = text.count("(") - text.count(")")
                if depth <= 0:
                    break
                i += 1
            pending = _locals_call(text.strip()[len("@cython.locals("):-1])
        elif pending is not None and (match := _DEF.match(line)):
            name = match.group(2)
            out.append((f"{current}.{name}" if match.group(1) and current else name, pending))
            pending = None
        i += 1
    return out


def function_locals(fn: ast.FunctionDef) -> set[str]:
    """Every name a function binds: its arguments and whatever its body assigns (not nested functions')."""
    args = fn.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    todo = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if not isinstance(node, ast.Lambda):
                names.add(node.name)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        todo.extend(ast.iter_child_nodes(node))
    return names


def functions(module: ast.Module) -> dict[str, ast.FunctionDef]:
    """"f" and "Class.f" -> its definition, for the module's functions and its classes' methods."""
    out: dict[str, ast.FunctionDef] = {}
    for node in module.body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            out.update((f"{node.name}.{f.name}", f) for f in node.body if isinstance(f, ast.FunctionDef))
    return out


def locals_pxd_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).glob("**/*.pxd")
                  if p.with_suffix(".py").exists() and typed_locals(p))


def stale_locals(pxd: Path) -> list[str]:
    """What a ``.pxd``'s @cython.locals name that its ``.py`` does not have, one line each."""
    defined = functions(ast.parse(pxd.with_suffix(".py").read_text()))
    problems = []
    for name, typed in typed_locals(pxd):
        if name not in defined:
            problems.append(f"{name}: no such function in {pxd.stem}.py")
        elif typed - function_locals(defined[name]):
            problems.append(f"{name}: {sorted(typed - function_locals(defined[name]))}")
    return problems


@pytest.mark.parametrize("pxd", locals_pxd_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pxd_locals_are_the_functions_locals(pxd: Path) -> None:
    problems = stale_locals(pxd)
    assert not problems, f"{pxd.name} types locals its functions do not have:\n" + "\n".join(problems)


def test_py_locals_are_the_functions_locals() -> None:
    # The same for a decorator written in the .py itself.
    problems = []
    for py in sorted(p for pkg in PACKAGES for p in (ROOT / pkg).glob("**/*.py")):
        for node in ast.walk(ast.parse(py.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and ast.unparse(deco.func) == "cython.locals":
                    extra = {kw.arg for kw in deco.keywords} - function_locals(node)
                    if extra:
                        problems.append(f"{py.relative_to(ROOT)}: {node.name}: {sorted(extra)}")
    assert not problems, "\n".join(problems)


def test_the_parser_reads_every_typed_function() -> None:
    # As for the classes: a declaration the parser no longer reads would pass unchecked.
    found = {(p.stem, name) for p in locals_pxd_files() for name, _ in typed_locals(p)}
    assert {("connection", "Connection._frames"), ("records", "_summarize"), ("recordset", "_parse_records"),
            ("ints", "be_int"),
            ("avrofast", "Program.varint")} <= found
    assert sum(len(typed) for p in locals_pxd_files() for _, typed in typed_locals(p)) >= 200
