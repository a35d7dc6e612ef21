"""Tests of the log-loss check: the detector, each log reader against a local stand-in, and the
file reader at the end of a real rsyslog pipeline with logrotate copytruncate."""
