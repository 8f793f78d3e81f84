"""One `Template` (template.py) per fused kind, each wrapping its kind's existing parse and emit
functions in templates/, and the tiling families their sites use (families.py)."""
