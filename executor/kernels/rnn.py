"""Fused recurrent cells: LSTMBlockCell, GRUBlockCell, BlockLSTM, BlockLSTMV2.
"""

from __future__ import annotations
