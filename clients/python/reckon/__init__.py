"""reckon's Python client, standard library only.

``reckon.Client(url, token=...)`` calls the HTTP API (defaults from
RECKON_URL and RECKON_TOKEN); ``@reckon.tool(project=..., run_id=...)``
guards and reports each call of an agent's tool function.
"""

from .client import Client, ReckonError, settlement_in, watched_operation
from .tool import AlreadyDone, Held, NoEffect, NotRun, Reckon, classify_error, tool

__all__ = ["Client", "ReckonError", "settlement_in", "watched_operation", "tool", "Reckon", "NoEffect", "NotRun", "Held",
           "AlreadyDone", "classify_error"]
__version__ = "0.1.0"
