"""What must hold: races between the pipes of a core (race.py), the invariants of every launch
record (invariants.py), on-chip capacity and unit placement of a kernel (capacity.py)."""
