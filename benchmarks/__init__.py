"""Benchmarks of the reference package against the libraries a user would pick instead.

``make bench`` (``python -m benchmarks.run``) measures every row in one run, prints a
table and writes ``benchmarks/results.json``; the book's Performance appendix renders
that file. ``python -m benchmarks.run --quick`` runs the same harness with tiny sizes.
"""
