"""The review stage: the studio's service and the leads' numbers.

The queue orders images by the expected benefit of one more review (`queue`, `ranking`, `active`, `benefit`) and
serves them to several studio processes through leases (`leases`) and assignments (`assignments`); `cards`,
`display` and `evidence` build what an annotator sees, `sessions`, `tokens` and `sign_in_throttle` who sees it.
The leads read agreement (`agreement`), the dashboard (`dashboard`), workspace counts (`stats`), suggestion trust
(`suggestion_trust`), the image grid (`grid`) and manage accounts (`users`) and guidelines (`guidelines`).
"""
