"""The instructor's term, one module per job.

========================  =====================================================
the course (one object)   :mod:`autograder.course.course` (:class:`Course`)
the records passed along  :mod:`autograder.course.records` (:class:`Term`,
                          :class:`TermEntry`, :class:`RosterEntry`, :class:`Grade`)
the term                  :mod:`autograder.course.term` (chapters, due dates,
                          late policies, submission times)
the class                 :mod:`autograder.course.roster` (``roster.json``,
                          removal into ``archive/``)
grades as read            :mod:`autograder.course.gradebook` (raw scores and
                          times, the current term applied)
collecting                :mod:`autograder.course.collect`,
                          :mod:`autograder.course.notebook_repair`
autograding               :mod:`autograder.course.autograde`
feedback                  :mod:`autograder.course.feedback`
exporting                 :mod:`autograder.course.export`
the issue log             :mod:`autograder.course.issue_log`
========================  =====================================================

The grading engine these modules drive (nbgrader runs, sandboxes, the clean room,
scheduling) stays in :mod:`autograder`.
"""

from .course import Course
from .records import Grade, RosterEntry, Term, TermEntry

__all__ = ["Course", "Grade", "RosterEntry", "Term", "TermEntry"]
