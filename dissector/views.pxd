# Compiled build only (setup.py); views.py stays the only source, pure Python ignores this file.
cdef class TopicPath:
    cdef readonly object path, name_field, id_field, partitions_field, index_field, list_field

cdef class PartitionRow:
    cdef public object topic, topic_id, partition, error_code, offset, high_watermark, record_count
    cdef public object batch_count, bytes, first_offset, last_offset, compression, records
