"""Where review matters next and how much more of it is needed: replaying a review on answers already given
(`simulation`, on a workspace's answers gathered by `pool`) and the review-budget forecast (`plan`) on a workspace's
posteriors and stored runs (`budget`, behind `relabel plan`).
"""
