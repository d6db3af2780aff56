"""Decoding on Spark: the kafka-pcap data source and `kdissect spark-decode`."""
