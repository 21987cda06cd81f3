"""The operator's log lines: text (the default) or JSON, one object per line, for log pipelines
that parse structured logs (KubeRay's chart value `logging.stdoutEncoder: json`).

Fifteen lines of formatter rather than a dependency: the standard library does the rest.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure(*, verbose: bool, log_format: str) -> None:
    """`log_format`: "text" or "json" (ValueError otherwise)."""
    if log_format not in FORMATS:
        raise ValueError(f"logFormat={log_format!r}: expected one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
