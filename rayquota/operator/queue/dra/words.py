"""A queue's reason in the words of whoever wrote the claim: a quota resource that DeviceClasses
are mapped to is followed by those classes, so a RayJob waiting on ``example.com/gpu`` says it
waits for DeviceClass ``gpu.example.com`` devices. Pure."""

from __future__ import annotations

import re

from rayquota.operator.queue.dra.settings import DraSettings

# The characters a resource name may go on with: a name is followed by none of them.
_NAME_GOES_ON = r"[-A-Za-z0-9_./]"


def naming_device_classes(reason: str, settings: DraSettings) -> str:
    """``reason`` with each mapped quota resource it names followed by its DeviceClasses."""
    for mapping in settings.mappings:
        classes = ", ".join(mapping.device_class_names)
        noun = "DeviceClass" if len(mapping.device_class_names) == 1 else "DeviceClasses"
        suffix = f" (DRA {noun} {classes})"
        pattern = rf"(?<!{_NAME_GOES_ON}){re.escape(mapping.name)}(?!{_NAME_GOES_ON})(?! \(DRA )"
        reason = re.sub(pattern, rf"\g<0>{suffix}", reason)
    return reason
