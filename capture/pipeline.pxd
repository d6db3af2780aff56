# Compiled build only (setup.py); pipeline.py stays the only source, pure Python ignores this file.
# CaptureEvent is cimported here too for the modules that cimport it from capture.pipeline.
from capture.events cimport CaptureEvent
from capture.fastpath cimport established
