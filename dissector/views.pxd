# Compiled build only (setup.py); views.py stays the only source, pure Python ignores this file.
# Startup: declared here, a dataclass is built by Cython at compile time; as Python, each costs
# ~0.6 ms of exec'd methods at import, 24 ms for the 38 a decode loaded (issue #8).
cdef class TopicPath:
    cdef readonly object path, name_field, id_field, partitions_field, index_field, list_field

cdef class PartitionRow:
    cdef public object topic, topic_id, partition, error_code, offset, high_watermark, record_count
    cdef public object batch_count, bytes, first_offset, last_offset, compression, records
