"""Development-only tools, never imported by the operator: a real Ray head on loopback and a tiny Serve
demo application."""
