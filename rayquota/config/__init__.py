"""The operator's one configuration: a file read once at start (`rayquota run --config FILE`),
with Kueue's `Configuration` names where Kueue has the setting, environment variables as
documented overrides of named keys, and the runtime settings built from it. docs/configuration.md
lists every key."""

from rayquota.config.build import Settings, settings
from rayquota.config.loader import ConfigError, Loaded, load
from rayquota.config.printing import render

__all__ = ["ConfigError", "Loaded", "Settings", "load", "render", "settings"]
