"""ONNX frontend: `import_onnx(path_or_proto, input_shapes)` → (`nn` module, WeightStore)."""

from ascendir.frontends.onnx.importer import NAME_ATTR, import_onnx

__all__ = ["NAME_ATTR", "import_onnx"]
