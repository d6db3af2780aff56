# Compiled build only (setup.py); pipeline.py stays the only source, pure Python ignores this file.
from capture.fastpath cimport established
