"""`dflashctl smoke`: real chat requests at temperature 0, checked answers, and the acceptance of
exactly that window (docs/smoke.md).
"""
