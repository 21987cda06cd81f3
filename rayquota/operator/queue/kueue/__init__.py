"""Kueue-API mode: which API group the queue integration acts on, Kueue's body shapes, and the guard
against a second Kueue controller."""
