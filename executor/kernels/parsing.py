"""Parsing serialized data: tf.Example / SequenceExample protos, CSV, raw bytes, serialized
tensors, JSON examples.
"""

from __future__ import annotations
