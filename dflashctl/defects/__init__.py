"""Known engine defects (noun; never prints): the catalogue (`defects.yaml`) and matching it to
the facts of a server, a log or a drafter (`catalogue`).
"""
