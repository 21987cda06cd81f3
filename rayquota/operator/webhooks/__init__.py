"""Admission webhooks of the operator (the queue integration's gate) and their certificate."""
