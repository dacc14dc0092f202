import os
import sys

# nanobind prints "leaked instances" at exit after UDFs were registered; keep it out of test output
os.environ.setdefault("NB_NO_LEAK_WARNINGS", "1")
sys.dont_write_bytecode = True

# Property tests are derandomized by default so CI runs the same examples every time (a red CI blocks
# everything); HYPOTHESIS_PROFILE=explore draws fresh random examples, as a developer should now and then.
from hypothesis import settings  # noqa: E402

settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
