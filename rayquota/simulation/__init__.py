"""Discrete-event simulation of the admission engine (see :mod:`.scenario` for the file format)."""
