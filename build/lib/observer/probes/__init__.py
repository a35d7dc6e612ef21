"""What to run, when and for whom: the probe catalog, the named windows in the platform's
timezone, and the judgement of how a probe ended against what it expected."""
