"""ctest entry for the parity tests: exits 77 (skipped) with a visible reason
when pytest or llama-cpp-python is missing, else runs pytest on the arguments."""
import importlib.util
import sys

SKIPPED = 77

for module, how in (("pytest", "pip install pytest"), ("llama_cpp", "ci/llama_cpp.sh")):
    if importlib.util.find_spec(module) is None:
        print(f"WARN: parity test skipped: python module '{module}' is missing ({how})")
        sys.exit(SKIPPED)

import pytest  # noqa: E402

code = pytest.main(["-q", "-s", "-p", "no:cacheprovider", *sys.argv[1:]])
# pytest exits 5 when everything was skipped (no data): report that as skipped.
sys.exit(SKIPPED if code == 5 else int(code))
