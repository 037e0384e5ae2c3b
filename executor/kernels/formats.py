"""File-format codecs: PNG, JPEG, GIF, BMP images and WAV audio, decode and encode.
"""

from __future__ import annotations
