"""Import every estimator family so that each registers its methods (see :mod:`.registry`)."""

from . import (
    asymmetric,  # noqa: F401  seed 002
    clipped,  # noqa: F401  plain clipped baseline with user bounds
    instance,  # noqa: F401  seed 004
    scalefree,  # noqa: F401  accuracy study R1 (float-code quantiles)
    smooth,  # noqa: F401  seed 001
    subset,  # noqa: F401  seed 000
    universal,  # noqa: F401  seed 003 (defaults), count, sum
)
