"""A run's place in its sweep:

collection.py   the Hub Collection named for the sweep: each run's repos with their notes, ordered by
                the varied value (the membership changes, made after the commits)
page.py         the comparison page, `<owner>/<sweep>-sweep`, rebuilt from every run's evaluation
siblings.py     every other run's card, its list of the sweep's runs rewritten
"""
