"""The dataset stage: events to rows to Arrow to Parquet files, and the dataset's schema."""
