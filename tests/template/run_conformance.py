"""ctest entry for the Jinja conformance test: exits 77 (skipped) with a visible
reason when pytest or jinja2 is missing, else runs pytest on the arguments."""
import importlib.util
import sys

SKIPPED = 77

for module, how in (("pytest", "pip install pytest"), ("jinja2", "pip install jinja2 (ci/install-deps.sh)")):
    if importlib.util.find_spec(module) is None:
        print(f"WARN: template conformance skipped: python module '{module}' is missing ({how})")
        sys.exit(SKIPPED)

import pytest  # noqa: E402

code = pytest.main(["-q", "-s", "-p", "no:cacheprovider", *sys.argv[1:]])
sys.exit(SKIPPED if code == 5 else int(code))
