"""Who a request acts for and what they may do: tokens, users and organizations, namespace rules, each
plan's rate limits and quotas, and the signed URLs that stand in for a token."""
