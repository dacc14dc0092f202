"""Import every estimator family so that each registers its methods (see :mod:`.registry`)."""

from . import universal  # noqa: F401  seed 003 (defaults), count, sum
from . import clipped  # noqa: F401  plain clipped baseline with user bounds
from . import subset  # noqa: F401  seed 000
from . import smooth  # noqa: F401  seed 001
from . import asymmetric  # noqa: F401  seed 002
from . import instance  # noqa: F401  seed 004
