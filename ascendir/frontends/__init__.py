"""Model importers: each turns an exported model into an `nn` module plus a WeightStore."""
