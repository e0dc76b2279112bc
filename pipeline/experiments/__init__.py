"""The judge designs, one folder a design: each holds its params, steps, aggregation and report,
and in design.py its DESIGN, the specs of its stages.

design.py says what a design and a stage are, steps.py what a stage that calls a model is;
registry.py finds the designs (the folders here with a design.py, and the judgeloop.designs entry
points) and params.py gathers their params.yaml sections into one model for the tools.
"""
