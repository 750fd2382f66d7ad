"""JSON-lines log records for a service on grelmicro[jwt]: one object per line.

Named by ``examples/log-config.json`` (``uvicorn --log-config log-config.json``)
as the formatter of every logger, uvicorn's and the library's: each line holds
the time (UTC, ISO 8601), the level, the logger, the worker's pid, the message
and, for the library's key-source events, every ``jwt_*`` field of the record
(``jwt_event``, ``jwt_source``, ``jwt_error``...: docs/observability.md). Copy
this file beside your app; it needs nothing beyond the standard library.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any


class JSONLines(logging.Formatter):
    """A record as one JSON object: the base fields, then every ``jwt_*`` extra."""

    def format(self, record: logging.LogRecord) -> str:
        """The record's JSON line (a traceback, when there is one, as ``exc_info``)."""
        moment = datetime.fromtimestamp(record.created, timezone.utc)
        line: dict[str, Any] = {
            "time": moment.isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        line.update({k: v for k, v in vars(record).items() if k.startswith("jwt_")})
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)
