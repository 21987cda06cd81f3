"""The composition root above the operator: it builds the operator's components, the web
dashboard and the servers from the configuration (`rayquota.config`) and passes each its handles
and settings. Nothing under `rayquota.operator` imports it."""
