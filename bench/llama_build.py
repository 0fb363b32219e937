"""Builds llama.cpp tools (llama-batched-bench, llama-server) for the bench/ comparisons.

The source is the llama.cpp that the llama-cpp-python sdist vendors; CI already caches
that sdist in ~/.cache/ferrox/sdist (ci/fetch_test_data.sh). It is unpacked once into
~/.cache/ferrox/llama.cpp-<version>/src and configured once into .../build-no-amx with the
server enabled (without its web UI, HTTPS or downloads), so every tool shares one build
of ggml and libllama; each call builds only the target it asks for. Nothing of
llama.cpp is ever committed: it lives in the cache.
"""
import glob
import os
import pathlib
import subprocess
import sys
import tarfile

CACHE = pathlib.Path(os.environ.get("FERROX_CACHE_DIR", pathlib.Path.home() / ".cache/ferrox"))
VERSION = os.environ.get("LLAMA_CPP_PYTHON_VERSION", "0.3.36")


def build_dir() -> pathlib.Path:
    return CACHE / f"llama.cpp-{VERSION}"


def _source() -> pathlib.Path:
    src = build_dir() / "src"
    if not src.exists():
        sdists = glob.glob(str(CACHE / "sdist" / f"llama_cpp_python-{VERSION}.tar.gz"))
        if not sdists:
            sys.exit(f"no llama-cpp-python {VERSION} sdist in {CACHE / 'sdist'}: run ci/fetch_test_data.sh")
        tmp = src.with_name("src.partial")
        tmp.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdists[0]) as t:
            t.extractall(tmp, filter="data")
        tmp.rename(src)  # a half-unpacked tree is never taken for a whole one
    return next(src.glob("llama_cpp_python-*/vendor/llama.cpp"))


# Native SIMD without AMX, as ci/llama_cpp.sh builds the wheel: on a CPU that has AMX,
# -march=native turns on ggml's AMX matmul, which dies here (SIGSEGV, or SIGILL on a
# tilezero in tinygemm_kernel_amx under llama-batched-bench: its tiles are used
# unconfigured). Explicit -mno flags win over -march=native. Its own build folder, so
# a cache holding an earlier AMX build is not reused.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


def build_llama_tool(target: str) -> pathlib.Path:
    """Path of the built `target` (e.g. "llama-server"), building it first if needed."""
    build = build_dir() / "build-no-amx"
    exe = build / "bin" / target
    if exe.exists():
        return exe
    llama = _source()
    if not (build / "CMakeCache.txt").exists():
        print(f"configuring llama.cpp {VERSION} in {build} (once)", file=sys.stderr)
        subprocess.run(["cmake", "-S", str(llama), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                        "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
                        "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=ON", "-DLLAMA_BUILD_TOOLS=ON",
                        "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
                        f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}"],
                       check=True, stdout=subprocess.DEVNULL)
    print(f"building {target} (once; minutes on 2 cores)", file=sys.stderr)
    subprocess.run(["cmake", "--build", str(build), "--target", target, "-j", str(os.cpu_count() or 2)],
                   check=True, stdout=subprocess.DEVNULL)
    if not exe.exists():
        sys.exit(f"built {target} but {exe} does not exist")
    return exe
