"""Each judge design's steps and aggregation, one folder a design; params.py gathers their sections."""
