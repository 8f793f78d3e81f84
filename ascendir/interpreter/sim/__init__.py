"""Who runs: one kernel launch (kernel.py), one device running a module (chip.py), N devices
joined by a topology (cluster.py)."""
