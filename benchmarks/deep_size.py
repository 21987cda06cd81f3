"""Deep sizes of Python object graphs, for in-process memory benchmarks.

A :class:`Weigher` remembers what it has counted: weighing holders one after another charges an
object shared between two of them to the first. Classes, modules, functions, coroutines and
event loops are not walked (they are the program, not its data).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import types
from collections.abc import Iterable
from typing import Any

_OPAQUE = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.CoroutineType,
    types.GeneratorType,
    types.AsyncGeneratorType,
    types.FrameType,
    types.CodeType,
    asyncio.AbstractEventLoop,
    asyncio.Task,
    asyncio.Future,
)


class Weigher:
    def __init__(self) -> None:
        self._seen: set[int] = set()

    def weigh(self, roots: Iterable[Any]) -> int:
        """Bytes of every object reachable from ``roots`` and not weighed before."""
        total = 0
        stack = list(roots)
        seen = self._seen
        while stack:
            obj = stack.pop()
            if id(obj) in seen or isinstance(obj, _OPAQUE):
                continue
            seen.add(id(obj))
            total += sys.getsizeof(obj)
            if isinstance(obj, (str, bytes, int, float, bool, type(None))):
                continue
            if isinstance(obj, dict):
                stack.extend(obj.keys())
                stack.extend(obj.values())
            elif isinstance(obj, (list, tuple, set, frozenset)):
                stack.extend(obj)
            else:
                attrs = getattr(obj, "__dict__", None)
                if attrs is not None:
                    stack.append(attrs)
                for cls in type(obj).__mro__:
                    for slot in getattr(cls, "__slots__", ()):
                        if isinstance(slot, str) and hasattr(obj, slot):
                            stack.append(getattr(obj, slot))
                if (
                    hasattr(obj, "__iter__")
                    and hasattr(obj, "__len__")
                    and not isinstance(obj, (memoryview,))
                ):
                    with contextlib.suppress(Exception):  # an iterable that cannot be listed here
                        stack.extend(list(obj))
        return total
