"""Leaderboard submissions: the JSON format (schema), building one from runs, validating a file
from anyone, the ELUE test-file export and the static leaderboard page.

Pure Python over pydantic and numpy: torch is needed only to resolve a model name (build) and
never to validate or render a file.
"""

from eebench.submit.schema import SUBMISSION_SCHEMA_VERSION, Submission, json_schema
from eebench.submit.validate import MAX_BYTES, Verdict, validate_file

__all__ = [
    "MAX_BYTES", "SUBMISSION_SCHEMA_VERSION", "Submission", "Verdict", "json_schema",
    "validate_file",
]
