"""Talking to a Hub: the token and client (`auth`), single-file downloads (`download`), retries of what a
flaky Hub answers (`retry`) and content hashes as the Hub names files (`hashing`). Nothing here knows about runs or what a push publishes."""
