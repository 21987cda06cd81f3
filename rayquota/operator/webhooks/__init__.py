"""Admission webhooks of the queue integration: queued Ray objects are born suspended, the
gate cannot be cleared on an object that is not admitted, malformed ClusterQueues are refused.

They are the first lock only: with the webhook down (failurePolicy Ignore, so a down
operator never blocks anyone) the reconciler re-asserts the gate and the RayCluster planner
creates no pod beyond the admitted caps.

One component (`setup`): `settings` decides where it is served and where its certificate
comes from, `server` serves the handlers of `review` on a thread of its own (`serving_thread`),
`cert_keeper` keeps or loads the certificate, `configurations` registers a loopback server's
own webhook configurations.
"""
