import sys
from pathlib import Path

# tests share helpers (conformance.py) as plain modules
sys.path.insert(0, str(Path(__file__).resolve().parent))
