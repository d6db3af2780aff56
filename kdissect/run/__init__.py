"""Running the pipeline over captures: options, inputs, decoding in one process or many, live capture."""
