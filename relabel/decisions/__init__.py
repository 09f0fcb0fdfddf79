"""What annotators record and which of it stands: the append-only decision log (`annotations`), read fast
(`log`), the pure rules of review (`rules`: which decisions stand, an image's consensus and category) and the
review-card flags (`card_flags`, registry `CARD_FLAGS`).
"""
