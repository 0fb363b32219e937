"""The package as installed: where it was imported from, what the wheel
carries (the core and the CPU plugin; never a CUDA plugin or runtime), that
the CPU plugin loaded is the wheel's, and that _lib.py declares what ferrox.h
declares."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

import ferrox
from ferrox import _lib

HEADER = Path(__file__).resolve().parents[2] / "core" / "include" / "ferrox" / "ferrox.h"
INSTALLED = os.environ.get("FERROX_TEST_INSTALLED") == "1"
PACKAGE = Path(ferrox.__file__).resolve().parent


@pytest.mark.skipif(not INSTALLED, reason="run by ci/python_wheel.sh against the installed wheel")
def test_the_package_is_the_installed_wheel_not_the_source_tree():
    assert PACKAGE.is_relative_to(Path(sys.prefix).resolve()), (PACKAGE, sys.prefix)
    assert Path(ferrox.library_path).resolve().is_relative_to(PACKAGE), ferrox.library_path
    assert [Path(d).resolve() for d in ferrox.bundled_plugin_dirs()] == [
        PACKAGE / "_native" / "lib" / "ferrox" / "plugins"
    ]
    assert re.fullmatch(r"\d+\.\d+\.\d+", ferrox.__version__), ferrox.__version__


@pytest.mark.skipif(not INSTALLED, reason="run by ci/python_wheel.sh against the installed wheel")
def test_the_wheel_carries_no_cuda_plugin_and_no_cuda_runtime():
    native = sorted(p.name for p in (PACKAGE / "_native").rglob("*") if p.is_file())
    assert "libferrox_cpu.so" in native and any(n.startswith("libferrox_core.so") for n in native)
    cuda = [n for n in native if re.search(r"cuda|cublas|nvrtc|nvidia", n, re.I)]
    assert not cuda, f"the wheel must never carry CUDA: {cuda}"
    plugins = sorted(p.name for p in (PACKAGE / "_native" / "lib" / "ferrox" / "plugins").iterdir())
    assert plugins == ["libferrox_cpu.so"], plugins


def test_the_cpu_plugin_mapped_is_the_one_beside_the_library(tiny_llama):
    # /proc/self/maps names the file each mapping came from (after symlinks).
    expected = Path(ferrox.bundled_plugin_dirs()[0]).resolve() / "libferrox_cpu.so"
    maps = Path("/proc/self/maps").read_text()
    mapped = {line.split(None, 5)[5] for line in maps.splitlines()
              if line.rstrip().endswith("libferrox_cpu.so")}
    assert mapped == {str(expected)}, mapped


def _header() -> str:
    return HEADER.read_text()


def test_bounds_and_codes_are_the_headers():
    text = _header()

    def define(name: str) -> int:
        found = re.search(rf"#define {name} \(?(\d+)u?(?: << (\d+))?\)?", text)
        assert found, name
        value = int(found.group(1))
        return value << int(found.group(2)) if found.group(2) else value

    assert define("FERROX_API_VERSION_MAJOR") == _lib.API_MAJOR
    assert define("FERROX_API_VERSION_MINOR") == _lib.API_MINOR
    assert define("FERROX_STATUS_MESSAGE_CAPACITY") == _lib.STATUS_MESSAGE_CAPACITY
    assert define("FERROX_CHAT_MAX_MESSAGES") == _lib.CHAT_MAX_MESSAGES
    assert define("FERROX_CHAT_MAX_ROLE") == _lib.CHAT_MAX_ROLE
    assert define("FERROX_CHAT_MAX_CONTENT") == _lib.CHAT_MAX_CONTENT
    assert define("FERROX_CHAT_MAX_JSON") == _lib.CHAT_MAX_JSON
    assert define("FERROX_CHAT_MAX_ANSWER") == _lib.CHAT_MAX_ANSWER
    assert define("FERROX_GRAMMAR_MAX_BYTES") == _lib.GRAMMAR_MAX_BYTES
    assert define("FERROX_JSON_SCHEMA_MAX_BYTES") == _lib.JSON_SCHEMA_MAX_BYTES
    states = dict(re.findall(r"FERROX_GRAMMAR_([A-Z]+) = (\d+)", text))
    assert {k: int(v) for k, v in states.items()} == {
        name: getattr(_lib, f"GRAMMAR_{name}") for name in states
    } and len(states) == 5
    codes = dict(re.findall(r"FERROX_CODE_([A-Z_]+) = (\d+)", text))
    assert {k: int(v) for k, v in codes.items()} == {
        name: getattr(_lib, name) for name in codes
    }
    # The documented detok-stream and context bounds, in the header's words.
    assert f"at most {_lib.DETOK_MAX_STOP_BYTES}; at most {_lib.DETOK_MAX_STOPS} per stream" in text
    assert f"at most {_lib.CONTEXT_MAX_SEQUENCES}" in text


def test_every_function_of_the_header_is_declared_with_its_arity():
    text = re.sub(r"/\*.*?\*/", "", _header(), flags=re.S)
    found = {}
    for m in re.finditer(r"FERROX_C_API\s+[^;(]*?\b(ferrox_\w+)\s*\(([^)]*)\)\s*;", text):
        args = m.group(2).strip()
        found[m.group(1)] = 0 if args in ("void", "") else args.count(",") + 1
    assert found and set(found) == set(_lib.PROTOTYPES), set(found) ^ set(_lib.PROTOTYPES)
    for name, arity in found.items():
        assert len(_lib.PROTOTYPES[name][1]) == arity, name


@pytest.mark.parametrize("struct, cls", [
    ("ferrox_call_status", _lib.CallStatus), ("ferrox_model_params", _lib.ModelParams),
    ("ferrox_residency", _lib.Residency), ("ferrox_text_segment", _lib.TextSegment),
    ("ferrox_chat_message", _lib.ChatMessage), ("ferrox_chat_params", _lib.ChatParams),
    ("ferrox_context_params", _lib.ContextParams), ("ferrox_batch", _lib.Batch),
    ("ferrox_logit_bias", _lib.LogitBias), ("ferrox_sampler_params", _lib.SamplerParams),
])
def test_every_struct_has_the_headers_members_in_order(struct, cls):
    text = re.sub(r"/\*.*?\*/", "", _header(), flags=re.S)
    body = re.search(rf"typedef struct {struct} \{{(.*?)\}} {struct};", text, re.S)
    assert body, struct
    members = []
    for decl in body.group(1).split(";"):
        decl = re.sub(r"\[[^\]]*\]", "", decl).strip()
        if not decl:
            continue
        if "(*" in decl:  # a function pointer member: its name is inside (*name)
            members.append(re.search(r"\(\*\s*(\w+)\)", decl).group(1))
            continue
        head, *rest = decl.split(",")
        members.append(re.findall(r"\w+", head)[-1])
        members.extend(r.strip().lstrip("*").strip() for r in rest)
    assert [name for name, _ in cls._fields_] == members


def test_a_cuda_plugin_comes_from_the_plugin_path_and_the_cpu_plugin_stays_the_wheels(
        tiny_llama_path, monkeypatch):
    # docs/python.md: a host's ferrox-cuda plugin folder given in
    # $FERROX_PLUGIN_PATH. The build's folder holds a CUDA plugin when the build
    # has one (CI's does); without a driver it is found and reports no-driver.
    folder = Path(os.environ.get("FERROX_CLI_PLUGIN_DIR", "/nonexistent"))
    if not (folder / "libferrox_cuda.so").is_file():
        pytest.skip(f"no CUDA plugin in {folder} (a build with FERROX_CUDA=OFF)")
    monkeypatch.setenv("FERROX_PLUGIN_PATH", str(folder))
    try:
        model = ferrox.Model(tiny_llama_path, backend=["cuda"], n_ctx=64)
    except ferrox.BackendError as e:  # no GPU here: the plugin was found, the device was not
        assert "cuda is not-found" not in e.message and "cuda is" in e.message, e.message
        return
    with model:  # a GPU host: the model runs on the plugin from that folder
        model.generate("a", max_tokens=2)
        assert {k["backend"] for k in model.kernel_report()["kernels"]} >= {"cuda"}
        maps = Path("/proc/self/maps").read_text()
        assert str(folder.resolve() / "libferrox_cuda.so") in maps
        assert str(folder.resolve() / "libferrox_cpu.so") not in maps
