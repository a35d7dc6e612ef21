"""The reports' pure builders: stored data in, a frozen report value out (figures of a period,
the daily summary, the go-live verdict); no I/O, no storage."""
