"""One `Template` (template.py) per nn op family lowered op by op: elementwise, matmul,
reduction, data movement, conv2d, pool2d, topk. Each names the op classes it lowers (`ops`);
registry.OP_TEMPLATES maps every class to its family's template. Only the matmul has tiled sites;
the others choose their tiles at emit time from the UB budget."""
