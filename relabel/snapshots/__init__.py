"""Frozen ReGT: a dataset's consensus labels frozen immutably under a content hash (`freeze`, `content_hash`),
read back in file-name order with their posteriors (`reader`) and compared (`diff`).
"""
