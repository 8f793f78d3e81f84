"""What a run tells: the report dict (report.py) and the Chrome trace (trace.py)."""
