"""Votes and consensus: every answer to "is class c in image i?" (imported workers' answers and studio decisions)
as one table (`table`, read in bulk by `scan` and `rater_file`), files of answers read (`formats`, registry
`VOTE_FORMATS`) and imported (`importing`), aggregated (`aggregation`, registry `METHODS`), turned into posteriors
and settled label sets (`posteriors`), calibrated (`calibration`) and measured along the risk-coverage curve
(`risk_coverage`); `fit` fits the consensus a snapshot freezes and `report` says what the votes say.
"""
