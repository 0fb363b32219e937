"""ctest entry for tests/bench: exits 77 (skipped, with the reason) when a module the
test needs is missing, else runs pytest on the arguments."""
import importlib.util
import sys

SKIPPED = 77

for module in ("pytest", "openai", "numpy"):
    if importlib.util.find_spec(module) is None:
        print(f"WARN: bench test skipped: python module '{module}' is missing (ci/install-deps.sh)")
        sys.exit(SKIPPED)

import pytest  # noqa: E402

sys.exit(int(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", *sys.argv[1:]])))
