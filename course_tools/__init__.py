"""Instructor and maintenance tools of Transformers from Scratch (students never import these).

    course_tools.grade         tfs-grade: execute student notebooks, report each exercise, --csv for a class
    course_tools.versions      tfs-versions: the installed versions against the pins of requirements.txt
    course_tools.make_student  solutions/ -> notebooks/ (the student versions)
"""
