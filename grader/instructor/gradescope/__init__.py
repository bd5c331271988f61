"""Gradescope: the autograder zip, and grading one submission inside Gradescope's container.

On Gradescope, grading happens in its container: the instructor uploads an autograder zip
once; Gradescope runs its ``setup.sh`` when it builds the image, then ``run_autograder``
for every submission, which grades ``/autograder/submission/`` and writes
``/autograder/results/results.json``. Modules:

- ``build``: ``grader gradescope LESSON --secret-file S --out autograder.zip`` writes the zip:
  ``setup.sh`` and ``run_autograder`` (the scripts beside this module), ``requirements.txt``
  (the grader's dependencies pinned to the versions installed here), ``autograder.json``
  (the lesson and how to name a student), the secret, and ``course/`` (the grader, the
  reference worker and solutions, rubrics, assignments). The zip holds the secret and the
  reference solutions: only instructors may hold it.
- ``upload``: which of the student's uploaded files are the submission, whatever they are named.
- ``run``: what ``run_autograder`` runs: grade on public and hidden cases, write results.json.
- ``results``: a grading report as Gradescope's results.json, checked against
  ``results.schema.json`` (Gradescope's documented format) before it is written.
"""
