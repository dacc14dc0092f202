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


import pytest  # noqa: E402


@pytest.fixture(params=["floor_whole", "floor_sampled"])
def floor_sample(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both scale-free floors (tests/core/test_summary.py, tests/plans): on every row (FLOOR_SAMPLE off) and on a
    Poisson subsample (on, FLOOR_KEEP = 64, so that groups of a few hundred rows run at rates 1/2 to 1/64)."""
    from dpsql.core import scalefree

    on = request.param == "floor_sampled"
    monkeypatch.setattr(scalefree, "FLOOR_SAMPLE", on)
    if on:
        monkeypatch.setattr(scalefree, "FLOOR_KEEP", 64.0)
    return on
