"""The controller's composition root: probe runs (runs.py), the plan through the windows and
scheduler sampling (work.py), APScheduler wiring (schedule.py, the only apscheduler
import) and the daemon (main.py)."""
