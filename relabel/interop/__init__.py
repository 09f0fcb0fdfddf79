"""Annotators' decisions in and out of the tools teams already use.

In: a CSV or JSONL table of decisions (image, user, classes, note) or a Label Studio project's JSON export
(`relabel.interop.rows`, `relabel.interop.label_studio`) becomes `DecisionRow`s, which `relabel.interop.decisions`
matches to the dataset's images, users and classes and stores through the studio's own decision check
(`relabel.decisions.annotations.insert_decision`), all in one transaction. Out: a snapshot written as Label Studio tasks
(`relabel.interop.label_studio.render_label_studio`, the `label-studio` entry of
`relabel.exports.formats.EXPORT_FORMATS`).
"""
