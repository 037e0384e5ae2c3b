"""Quantization: QuantizeV2, Dequantize, QuantizeAndDequantize*, per-channel fake quant,
requantization.
"""

from __future__ import annotations
