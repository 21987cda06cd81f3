"""rayquota: Ray on Kubernetes under GPU quotas."""

__version__ = "0.2.0"
