"""What a queued object asks of the quota: pod sets, topology requests, priority, and the words that
name them."""
