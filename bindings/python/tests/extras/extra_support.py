"""Tests of the package's extras (`pip install "<wheel>[EXTRA]"`), each run by
scripts/python-tests.sh in a venv holding only the wheel with that extra (and pytest), with
``SYNTHKIT_EXTRA`` set to it: there a missing module fails the test instead of skipping it."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def need(module: str, extra: str) -> ModuleType:
    """``module``, which the extra ``extra`` must install."""
    if os.environ.get("SYNTHKIT_EXTRA") == extra:
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"the [{extra}] extra is not installed")
