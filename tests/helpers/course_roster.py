"""Give a test course the roster an instructor would import before collecting.

Since collecting without a roster names every folder in ``grading_issues.csv``, a class that a test
expects to leave no issue is given its roster first, as ``book/instructors.md`` tells an instructor
to.
"""

import csv


def import_roster(course, students, folder):
    """Write ``students`` (ids) to ``folder/roster.csv`` and import it into ``course``."""
    path = folder / "roster.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "first_name", "last_name", "email"])
        for s in sorted(students):
            w.writerow([s, s.title(), "Student", f"{s}@example.org"])
    course.import_roster(path)
    return path
