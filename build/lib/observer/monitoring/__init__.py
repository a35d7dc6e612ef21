"""The monitoring pipeline as the observer sees it from outside: the Prometheus boundary (its
HTTP adapter and a scripted fake), the heartbeat read back through it, and the lag checker."""
