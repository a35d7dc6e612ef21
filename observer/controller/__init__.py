"""The controller's composition root: probe runs (runs.py), the plan through the windows and
scheduler sampling (work.py), the controller-side rules (watches/, checked by detect.py),
APScheduler wiring (schedule.py, the only apscheduler import) and the daemon (main.py)."""
