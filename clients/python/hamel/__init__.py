"""hamel — a Python client of the hamel service (nonholonomic mechanical systems).

    import hamel
    c = hamel.Client("http://127.0.0.1:8080")
    r = c.simulate("greenwood-5.3-rolling-disk.json", t_end=10)
    r.t, r.q["theta"], r.speeds["Omega"], r.checks["energy"]

Standard library and numpy; pandas only for Result.to_pandas().
"""

from .client import Client, Models, merge_request
from .errors import HamelError, HamelWarning
from .result import Result

__all__ = ["Client", "Models", "Result", "HamelError", "HamelWarning", "merge_request"]
__version__ = "0.1.0"
