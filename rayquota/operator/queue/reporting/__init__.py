"""The queue integration's metrics (rayquota's and Kueue's families) and fair sharing in the queues'
status and metrics."""
