"""Statistics that measure a judge against people: agreement (correlations with group-bootstrap
intervals, Krippendorff's alpha, AUROC, a held-out balanced accuracy: correlation, reliability,
classification, on bootstrap's resampling) and calibration (a judge's
scores joined to human ratings, per metric). Numbers in memory, no I/O, no model: a layer beside
the judges, importing only pipeline.data."""
