"""A judge that scores any set of dimensions at once, under schema-constrained decoding.

dimensions.py   the dimensions (from params) and the reply model built from them
judge.py        one judgement: ask, validate, map 1-5 to 0-1, weight, read log-probabilities
"""
