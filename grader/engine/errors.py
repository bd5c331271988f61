"""Errors the grader reports to a person: one line naming the file and the field."""


class InputError(Exception):
    """Bad input from a person (a rubric, a workload, a secret, a submission path).

    The CLI prints ``str(error)`` as one line and exits 2; nothing already graded is lost.
    """

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message
