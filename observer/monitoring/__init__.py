"""The monitoring pipeline as the observer sees it from outside: the Prometheus boundary, the
heartbeat the observer exports through it, and the checker that measures its lag."""
