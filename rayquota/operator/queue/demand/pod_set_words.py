"""Pod sets named as their user knows them, in every sentence a human reads.

A Workload's pod sets have internal names (a RayService's ``gpu-50baf``: the group and a digest
of the pod shape, so two clusters' pods of one shape share quota). The engine's reasons use
those names; before a reason reaches a Workload's status, an event or ``rayquota explain``,
each name becomes what the user wrote: "worker group `gpu` of cluster `greeter-zhkj3`", "the
head of RayJob `first`", "the submitter of RayJob `first`".

The words for each pod set are kept on the Workload (annotation ``rayquota.io/pod-set-names``),
written with its pod sets, so the CLI reads the same words without the Ray objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from rayquota.operator.queue.demand.podsets import Demand, GroupKey, Role

POD_SET_WORDS_ANNOTATION = "rayquota.io/pod-set-names"

# "pod set <name>" as the engine writes it; pod set names are DNS labels.
_POD_SET = re.compile(r"\bpod set ([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)\b")


class KindRecord(Protocol):
    """What the words need of an integration record: its kind (and, optionally, ``OwnersInWords``)."""

    @property
    def kind(self) -> str: ...


@runtime_checkable
class OwnersInWords(Protocol):
    """A record's capability (adapters/capabilities.py): how its pods' owners are named in
    messages. Without it: ``<kind> `<name>```."""

    def owners_in_words(self, name: str, parts: Collection[str], live: Collection[str]) -> str | None:
        """``parts``: the parts a group of pods is in; ``live``: the object's existing child
        clusters. None: the default words."""
        ...


def joined_names(names: list[str]) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" and {quoted[-1]}"


def _phrase(key: GroupKey, owners: str) -> str:
    role, group = key
    if role is Role.HEAD:
        return f"the head of {owners}"
    if role is Role.SUBMITTER:
        return f"the submitter of {owners}"
    if role is Role.MAIN:
        return f"the pods of {owners}"
    return f"worker group `{group}` of {owners}"


def pod_set_words(record: KindRecord, name: str, demand: Demand, clusters: Iterable[str]) -> dict[str, str]:
    """Pod set name -> words, for an object of ``record``'s kind called ``name`` whose child
    clusters are ``clusters``. A kind says how its owners are named (``OwnersInWords``: a
    RayService's pods by cluster, an upgrade runs two); otherwise the object's kind and name
    are what its user knows (a RayJob's one cluster is named after it, and the words do not
    change when the cluster is created: no extra Workload write)."""
    live = set(clusters)
    places: dict[str, dict[GroupKey, list[str]]] = {}
    for part, groups in demand.pod_set_of.items():
        for key, pod_set in groups.items():
            places.setdefault(pod_set, {}).setdefault(key, [])
            if part not in places[pod_set][key]:
                places[pod_set][key].append(part)
    words: dict[str, str] = {}
    for pod_set, keys in places.items():
        phrases = []
        for key, parts in keys.items():
            owners = None
            if isinstance(record, OwnersInWords):
                owners = record.owners_in_words(name, parts, live)
            if owners is None:
                owners = f"{record.kind} `{name}`"
            phrases.append(_phrase(key, owners))
        words[pod_set] = " and ".join(sorted(set(phrases)))
    return words


def in_words(sentence: str, words: Mapping[str, str]) -> str:
    """``sentence`` with each "pod set <name>" it mentions replaced by that pod set's words."""
    if not words or "pod set " not in sentence:
        return sentence

    def replace(match: re.Match[str]) -> str:
        return words.get(match.group(1)) or match.group(0)

    return _POD_SET.sub(replace, sentence)


def annotation_value(words: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(words.items())), separators=(",", ":"))


def words_of(workload: Mapping[str, Any] | None) -> dict[str, str]:
    """The words a Workload carries (none for a Workload we did not create)."""
    raw = (((workload or {}).get("metadata") or {}).get("annotations") or {}).get(POD_SET_WORDS_ANNOTATION)
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in parsed.items()} if isinstance(parsed, dict) else {}


def reason_in_words(reason: str, workload: Mapping[str, Any] | None) -> str:
    """The engine's sentence about a Workload as every reader shows it (status, events, the CLI,
    the dashboard): its pod sets named with the words the Workload carries."""
    return in_words(reason, words_of(workload))
