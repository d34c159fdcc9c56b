"""A run's place in its sweep, every commit of it in the push's plan:

collection.py   the Hub Collection named for the sweep: each run's repos with their notes, ordered by
                the varied value (the membership changes, made after the commits)
page.py         the comparison page, `<owner>/<sweep>-sweep`, rebuilt from every run's evaluation
siblings.py     every other run's card, its list of the sweep's runs rewritten
reads.py        what the read stage reads of the sweep: its Collection once, the page's repo, the other
                runs' evaluations and cards
plans.py        the page, the Space and the sibling cards as repo plans of the push, and the Collection's changes
space.py        the sweep's one Space, `<owner>/<sweep>-demo`: every run of it, a run then a checkpoint picked
"""
