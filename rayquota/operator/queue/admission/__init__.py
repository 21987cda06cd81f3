"""The engine's home in the operator: the admission loop and driver, the converter from API objects to
the engine's model, a Workload's status as the driver sees it (admission, checks, pods ready), and
the configuration objects' controllers it needs."""
