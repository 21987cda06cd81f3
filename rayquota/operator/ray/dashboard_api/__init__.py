"""The Ray dashboard's REST API: the async client, its name lookups, and where each cluster's dashboard
is found."""
