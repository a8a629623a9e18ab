"""Errors and warnings of the hamel client."""


class HamelError(Exception):
    """The service answered with an RFC 9457 problem document (or no usable answer).

    Attributes:
        status: the HTTP status (or the problem's own ``status``), 0 without an answer.
        type: the problem's ``type`` URI (``.../problems/invalid-model``).
        code: the last segment of ``type`` (``invalid-model``).
        title, detail: the problem's texts ("" when absent).
        errors: the problem's ``errors`` list: dicts with ``path``, ``reason`` and, for
            expressions, ``column``.
        problem: the whole problem document (a dict), e.g. with ``partial`` for a failed
            run, ``job_id`` for a failed job.
    """

    def __init__(self, status, problem=None, message=None):
        problem = problem if isinstance(problem, dict) else {}
        self.problem = problem
        st = problem.get("status")
        self.status = st if isinstance(st, int) else status
        self.type = str(problem.get("type", "about:blank"))
        self.code = self.type.rstrip("/").rsplit("/", 1)[-1]
        self.title = str(problem.get("title", ""))
        self.detail = str(problem.get("detail", ""))
        errors = problem.get("errors")
        self.errors = list(errors) if isinstance(errors, list) else []
        self.job_id = problem.get("job_id")
        self.partial = problem.get("partial")
        super().__init__(message if message is not None else self._describe())

    def _describe(self):
        head = "%s %s" % (self.status, self.code)
        text = self.title or self.detail
        lines = [head + (": " + text if text else "")]
        if self.detail and self.detail != text and not self.errors:
            lines.append("  " + self.detail)
        for e in self.errors:
            if not isinstance(e, dict):
                lines.append("  %s" % (e,))
                continue
            where = str(e.get("path", "(no path)"))
            if isinstance(e.get("column"), int):
                where += " column %d" % e["column"]
            lines.append("  %s: %s" % (where, e.get("reason", "")))
        return "\n".join(lines)


class HamelWarning(UserWarning):
    """A warning the service attached to a result (its top-level ``warnings`` list)."""


def warning_text(w):
    """One line for a warning entry, whatever its shape (a string or an object)."""
    if isinstance(w, str):
        return w
    if isinstance(w, dict):
        parts = []
        for key in ("code", "type", "path"):
            if w.get(key):
                parts.append(str(w[key]))
        msg = w.get("message") or w.get("detail") or w.get("reason") or w.get("title")
        head = " ".join(parts)
        if msg:
            return head + ": " + str(msg) if head else str(msg)
        return head or str(w)
    return str(w)
