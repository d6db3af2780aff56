# Compiled build only (setup.py); redact.py stays the only source, pure Python ignores this file.
# needs_redaction is asked twice an exchange (dissector/connection.py): cimported, a C call.
cpdef bint needs_redaction(object api_key) except -1
