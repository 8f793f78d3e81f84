"""What each op does: the closure compiler (compiler.py), tile-op numerics (semantics.py, cast.py,
special.py), scalar arith (scalar.py), the op registry (registry.py), the static walk of a
kernel body (walk.py), and the reference interpreter of the `nn` dialect (nn_reference.py)."""
