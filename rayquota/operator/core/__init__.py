"""The controller runtime every rayquota controller runs on: the informer cache (`cache/`), the
controllers and their work queue, status writes, finalizers and Events; see docs/operator-core.md."""

from rayquota.operator.core import resources
from rayquota.operator.core.cache.informer import ADDED, DELETED, MODIFIED, Informer
from rayquota.operator.core.cache.scope import NamespaceScope
from rayquota.operator.core.cache.store import Store, label_indexer, owner_uids
from rayquota.operator.core.controller import Controller, Result, WaitForCache
from rayquota.operator.core.events import EventRecorder
from rayquota.operator.core.expectations import Expectations
from rayquota.operator.core.gate import (
    QUOTA_RESERVED,
    AdmissionGate,
    GateVerdict,
    NoGate,
    Placement,
    QueueCondition,
)
from rayquota.operator.core.manager import Manager
from rayquota.operator.core.resources import ObjectKey, Resource
from rayquota.operator.core.status import StatusWriter, without_nulls

__all__ = [
    "ADDED",
    "DELETED",
    "MODIFIED",
    "QUOTA_RESERVED",
    "AdmissionGate",
    "Controller",
    "EventRecorder",
    "Expectations",
    "GateVerdict",
    "Informer",
    "Manager",
    "NamespaceScope",
    "NoGate",
    "ObjectKey",
    "Placement",
    "QueueCondition",
    "Resource",
    "Result",
    "StatusWriter",
    "Store",
    "WaitForCache",
    "label_indexer",
    "owner_uids",
    "resources",
    "without_nulls",
]
