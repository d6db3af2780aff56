"""Importing the exporter libraries, with one line saying what to install when one is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from kdissect.errors import KdissectError

HINT = "pip install 'kafka-dissect[metrics]'"


def need(module: str, package: str, option: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise KdissectError(f"{option} needs the Python package {package}: {HINT}") from None
