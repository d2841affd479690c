"""Report objects that every workflow returns; only cli/ renders them.

Field names are part of the JSON contract (README "Reports"): `command`,
`status`, `exit_code`, `workload_exit_code`, `profile`, `log_path`,
`trace_dir`, `modules` (a list of objects with at least `module` and `status`).
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class Report:
    command: str
    status: str
    exit_code: int = 0
    workload_exit_code: int | None = None
    profile: dict[str, Any] | None = None
    log_path: str | None = None
    trace_dir: str | None = None
    run_dir: str | None = None
    modules: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # Why the status is what it is, in sentences a user can act on.
    reasons: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    # Command-specific sections (step_times, phases, manifest, ...).
    details: dict[str, Any] = dataclasses.field(default_factory=dict)
    # One-line summary for humans; cli prints it, JSON keeps it too.
    summary: list[str] = dataclasses.field(default_factory=list)

    @property
    def exit_code_from(self) -> str | None:
        """Whose code `exit_code` is: "workload" (its own non-zero exit, passed through: a
        workload's 2 is not pgle's bad input), "pgle" (pgle's own conclusion), None for 0."""
        if not self.exit_code:
            return None
        if self.workload_exit_code not in (None, 0) and self.exit_code == self.workload_exit_code:
            return "workload"
        return "pgle"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        details = d.pop("details")
        d["exit_code_from"] = self.exit_code_from
        for key, value in details.items():
            d.setdefault(key, value)
        return d

    def to_json(self) -> str:
        """The report as written anywhere (stdout, --report, a job folder): secrets redacted."""
        import json  # only --json and --report need it (start-up, issue 16)

        from pgle.redact import redact_json

        return json.dumps(redact_json(self.to_dict()), indent=2, sort_keys=False, default=str)
