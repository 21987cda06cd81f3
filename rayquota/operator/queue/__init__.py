"""The queue integration: Ray objects under quota (see ../../../docs and design.md)."""
