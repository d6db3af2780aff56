# Compiled build only (setup.py): body_bytes as a C call for the row builder, which calls it
# twice an exchange (issue #8). bodies.py stays the only source; pure Python ignores this file.
from hotpath._speedups cimport plain_json

cpdef bytes body_bytes(body)
