"""The alert boundary: which alerts fire now, as an alert source says (Alertmanager's API v2
through its one HTTP adapter)."""
