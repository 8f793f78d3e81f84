"""One `Template` (template.py) per fused kind, each wrapping its kind's parse and emit functions
in templates/; one per op family in ops/; and the tiling families their sites use (families.py)."""
