"""A release's artifacts checked against the adapter they came from, loaded as users load them."""
