"""rayquota: Ray on Kubernetes under GPU quotas."""

__version__ = "0.1.0"
