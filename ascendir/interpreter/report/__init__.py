"""What a run tells: the report dict (report.py), its headline and breakdowns (headline.py) and the
Chrome trace (trace.py)."""
