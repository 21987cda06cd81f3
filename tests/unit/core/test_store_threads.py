"""The store read from another thread (the admission webhooks' own) while the event loop writes
it: a reader sees an update whole, never half applied."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from rayquota.operator.core.cache.store import Store

WAIT_S = 10.0


def owned(version: str) -> dict[str, Any]:
    return {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": version, "owner": "u1"}}


def test_a_reader_on_another_thread_never_sees_an_object_out_of_its_index() -> None:
    inside_update = threading.Event()
    finish_update = threading.Event()

    def by_owner(obj: Mapping[str, Any]) -> list[str]:
        if obj["metadata"]["resourceVersion"] == "2":  # the update's own indexing: held midway
            inside_update.set()
            assert finish_update.wait(WAIT_S)
        return [str(obj["metadata"]["owner"])]

    store = Store({"owner": by_owner})
    store.upsert(owned("1"))
    writer = threading.Thread(target=store.upsert, args=(owned("2"),))
    writer.start()
    assert inside_update.wait(WAIT_S)
    # The update has taken the old version out of the index and not yet put the new one in.
    seen: list[list[str]] = []
    read = threading.Event()

    def reader() -> None:
        seen.append([o["metadata"]["resourceVersion"] for o in store.by_index("owner", "u1")])
        read.set()

    reading = threading.Thread(target=reader)
    reading.start()
    # The read waits for the update (bounded: without the lock it answers at once, with nothing).
    answered_midway = read.wait(0.5)
    finish_update.set()
    writer.join(WAIT_S)
    reading.join(WAIT_S)
    assert not answered_midway
    assert seen == [["2"]]
