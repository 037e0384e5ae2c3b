"""TensorFlow-compatible protobuf schemas (GraphDef family) and their generated modules."""
