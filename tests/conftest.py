import os
import sys

# nanobind prints "leaked instances" at exit after UDFs were registered; keep it out of test output
os.environ.setdefault("NB_NO_LEAK_WARNINGS", "1")
sys.dont_write_bytecode = True
