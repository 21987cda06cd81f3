"""Small pieces every page's view model shares: paging, quantities, conditions, and hiding
what a user may not see."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rayquota.queueing import format_quantity

DEFAULT_PAGE = 100
MAX_PAGE = 500
HIDDEN = "a workload in a namespace you cannot list"
KEY_PATTERN = re.compile(r"\b([a-z0-9][-a-z0-9.]*)/([a-z0-9][-a-z0-9.~]*)\b")


@dataclass(frozen=True)
class Page:
    offset: int = 0
    limit: int = DEFAULT_PAGE

    @classmethod
    def of(cls, query: Mapping[str, str]) -> Page:
        """From ``?offset=&limit=``; bad values are refused with the parameter named."""
        values = {}
        for name, default, top in (("offset", 0, None), ("limit", DEFAULT_PAGE, MAX_PAGE)):
            raw = query.get(name)
            try:
                value = int(raw) if raw not in (None, "") else default
            except ValueError:
                raise ValueError(f"{name}={raw!r}: expected a whole number") from None
            if value < 0 or (top is not None and value > top):
                bound = f"between 0 and {top}" if top else "0 or more"
                raise ValueError(f"{name}={value}: expected {bound}")
            values[name] = value
        return cls(values["offset"], values["limit"] or DEFAULT_PAGE)

    def cut(self, items: Sequence[Any]) -> dict[str, Any]:
        return {
            "total": len(items),
            "offset": self.offset,
            "limit": self.limit,
            "items": list(items[self.offset : self.offset + self.limit]),
        }


def amount(milli: int, resource: str) -> dict[str, Any]:
    """A quantity for the page: the number for bars, the words for people."""
    return {"value": milli / 1000, "text": format_quantity(milli, resource)}


def amounts_text(totals: Mapping[str, int]) -> str:
    return ", ".join(f"{r} {format_quantity(q, r)}" for r, q in sorted(totals.items())) or "-"


def conditions(obj: Mapping[str, Any]) -> list[dict[str, str]]:
    return [
        {
            "type": str(c.get("type") or ""),
            "status": str(c.get("status") or ""),
            "reason": str(c.get("reason") or ""),
            "message": str(c.get("message") or ""),
            "time": str(c.get("lastTransitionTime") or ""),
        }
        for c in (obj.get("status") or {}).get("conditions") or []
    ]


def meta_ref(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = obj["metadata"]
    return {"namespace": str(meta.get("namespace") or ""), "name": str(meta["name"])}


def redact(text: str, hidden_namespaces: Iterable[str] | None, visible: frozenset[str] | None) -> str:
    """Replace ``namespace/name`` keys of namespaces the user may not list. ``visible`` None:
    the user sees every namespace. ``hidden_namespaces`` names the ones known to exist, so a
    path-like phrase that is no workload key ("flavor/resource") stays as it is."""
    if visible is None or not text:
        return text
    hidden = set(hidden_namespaces or ()) - visible

    def swap(match: re.Match[str]) -> str:
        return HIDDEN if match.group(1) in hidden else match.group(0)

    return KEY_PATTERN.sub(swap, text)
