"""The controller's view of the node agents: which agents there are and their snapshots,
over HTTP (http.py) or in process (local.py, for the simulator and tests)."""
