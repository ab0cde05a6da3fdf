"""The package as users get it: the wheel (scripts/build-wheel.sh) installed into a venv
with no Rust toolchain reachable, its import names (`synthkit_rs`, the LlamaIndex adapter in
LlamaIndex's namespace packages) and no `synthkit` top-level module (PyPI's `synthkit` is
another project with that import name).

scripts/python-tests.sh sets ``SYNTHKIT_TEST_WHEEL`` to the wheel it installed; without it
the installation test is skipped (failed when ``CI`` is set).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest

import synthkit_rs

DIST = "llama-index-response-synthesizers-synthkit"
SOURCE = pathlib.Path(__file__).resolve().parent.parent


def _wheel() -> pathlib.Path:
    wheel = os.environ.get("SYNTHKIT_TEST_WHEEL", "")
    if not wheel:
        if os.environ.get("CI"):
            pytest.fail("SYNTHKIT_TEST_WHEEL is not set: run scripts/python-tests.sh in CI")
        pytest.skip("not run by scripts/python-tests.sh (SYNTHKIT_TEST_WHEEL unset)")
    return pathlib.Path(wheel)


def test_the_installed_wheel_runs_with_no_rust_toolchain_on_path() -> None:
    wheel = _wheel()
    for tool in ("cargo", "rustc"):
        assert shutil.which(tool) is None, f"{tool} is reachable on PATH: {shutil.which(tool)}"
    # The module is the installed one, not the source tree's.
    module = pathlib.Path(synthkit_rs.__file__).resolve()
    assert SOURCE not in module.parents, module
    assert pathlib.Path(sys.prefix).resolve() in module.parents, (module, sys.prefix)
    # The installed distribution is the wheel's: one abi3 wheel for every CPython >= 3.9.
    name, version, _build_or_py, abi = wheel.name[: -len(".whl")].split("-")[:4]
    assert name == DIST.replace("-", "_") and abi == "abi3", wheel.name
    assert wheel.name.split("-")[2] == "cp39", wheel.name
    assert importlib.metadata.version(DIST) == version == synthkit_rs.__version__
    files = {str(f) for f in importlib.metadata.files(DIST) or []}
    assert "synthkit_rs/_synthkit.abi3.so" in files, sorted(files)
    assert "llama_index/response_synthesizers/synthkit/__init__.py" in files, sorted(files)
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert {f for f in files if not f.startswith(("..", "/"))} <= set(names) | {
        f for f in files if ".dist-info/" in f or f.endswith(".pyc")
    }


def test_the_wheel_holds_no_synthkit_top_level_module_and_no_namespace_init() -> None:
    files = {str(f) for f in importlib.metadata.files(DIST) or []}
    assert files, f"{DIST} is not installed"
    tops = {f.split("/")[0] for f in files if ".dist-info/" not in f}
    assert tops == {"synthkit_rs", "llama_index"}, tops
    # LlamaIndex's namespace packages stay namespaces: no __init__.py of ours in them.
    assert "llama_index/__init__.py" not in files
    assert "llama_index/response_synthesizers/__init__.py" not in files
    assert importlib.util.find_spec("synthkit") is None


def test_exceptions_belong_to_synthkit_rs() -> None:
    for cls in (synthkit_rs.SynthkitError, synthkit_rs.InputError, synthkit_rs.ModelError,
                synthkit_rs.RefusalError, synthkit_rs.TruncationWarning):
        assert cls.__module__ == "synthkit_rs", cls
    assert synthkit_rs.Synthesizer.__module__ == "synthkit_rs._synthkit"


def test_the_adapter_imports_from_llama_index_s_namespace() -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.response_synthesizers.base import BaseSynthesizer

    import llama_index.response_synthesizers as namespace
    from llama_index.response_synthesizers.synthkit import SynthkitSynthesizer

    assert getattr(namespace, "__file__", None) is None, "not a namespace package"
    assert issubclass(SynthkitSynthesizer, BaseSynthesizer)
    assert SynthkitSynthesizer.__module__ == "llama_index.response_synthesizers.synthkit.base"
    import llama_index.core  # noqa: F401  (the other half of the namespace still imports)


def test_the_adapter_without_llama_index_core_names_the_extra_to_install():
    # llama_index.core hidden from the import system: what a user without the extra sees.
    code = textwrap.dedent(
        """
        import sys
        class Hide:
            def find_spec(self, name, path=None, target=None):
                if name == "llama_index.core" or name.startswith("llama_index.core."):
                    raise ImportError("No module named " + repr(name))
                return None
        sys.meta_path.insert(0, Hide())
        try:
            import llama_index.response_synthesizers.synthkit
        except ImportError as e:
            print(e)
        import synthkit_rs
        print(synthkit_rs.Synthesizer("compact").synthesize("q?", ["q is a letter."]).response != "")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "[llama-index] extra" in out.stdout, out.stdout
    assert out.stdout.strip().endswith("True"), out.stdout
