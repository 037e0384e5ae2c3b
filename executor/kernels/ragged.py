"""Ragged tensors: RaggedRange, RaggedGather, RaggedTensorToTensor, RaggedTensorToSparse,
RaggedCross, RaggedBincount, RaggedFillEmptyRows and the ragged variant encoding.
"""

from __future__ import annotations
