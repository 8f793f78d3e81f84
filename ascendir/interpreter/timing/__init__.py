"""When it happens: per-core pipe queues and flag queues (timeline.py) and the chip L2 shared by
the GM traffic of all cores (l2.py). Op cycles themselves come from ascendir.costmodel."""
