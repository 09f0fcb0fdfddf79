"""Label sources and predictions in: the labels of earlier relabeling efforts (`labels`, registry
`SOURCE_FORMATS`) and model runs made elsewhere (`predictions`, registry `PREDICTION_FORMATS`), matched to the
dataset's images (`rows`) and written in bulk (`bulk`, `row_store`); full score vectors kept beside the database
(`score_vectors`).
"""
