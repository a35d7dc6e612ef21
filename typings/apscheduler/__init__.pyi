"""Types for the parts of APScheduler 3.x that observer.controller.schedule uses."""
