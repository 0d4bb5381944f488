"""Generate ``pretrained_saes.json`` (the release directory ``SAE.from_pretrained`` reads) from
SAELens's ``pretrained_saes.yaml``, keeping its attribution; rerun it to refresh the table.

SAELens's release directory is MIT-licensed data (Copyright (c) 2023 Joseph Bloom). The
generated file records the SAELens version, git tag, the YAML's sha256 and the licence.

Run it from the repository root, with sae-lens installed (its own YAML is read) or a path:

    python3 -m interp.sae.loading.make_releases_table                    # installed sae-lens
    python3 -m interp.sae.loading.make_releases_table --yaml pretrained_saes.yaml \\
        --version 6.45.3 [--commit SHA]

The table keeps, for each release, ``repo_id``, ``model``, ``conversion_func``,
``config_overrides`` and ``links``, and for each SAE its ``id``, ``path``, ``l0``,
``variance_explained``, ``neuronpedia`` and ``norm_scaling_factor`` (null where the YAML has
none; ``path`` null where it equals ``id``), one release a line so refreshes diff well.

Example:
    >>> table = build_table({"my-release": {"repo_id": "me/saes", "model": "gpt2",
    ...     "saes": [{"id": "blocks.0.hook_resid_pre", "path": "blocks.0.hook_resid_pre",
    ...               "l0": 10.0}]}}, version="6.45.3", sha256="0" * 64, commit=None)
    >>> table["releases"]["my-release"]["saes"]
    [['blocks.0.hook_resid_pre', None, 10.0, None, None, None]]
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

TABLE = Path(__file__).with_name("pretrained_saes.json")
SAE_COLUMNS = ["id", "path", "l0", "variance_explained", "neuronpedia", "norm_scaling_factor"]
RELEASE_FIELDS = ["repo_id", "model", "conversion_func", "config_overrides", "links"]
# SAELens's LICENSE, verbatim (sae-lens 6.45.3).
LICENSE = """\
MIT License

Copyright (c) 2023 Joseph Bloom

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""


def build_table(
    data: dict[str, Any], version: str, sha256: str, commit: str | None
) -> dict[str, Any]:
    """The table from the YAML's parsed ``data`` (release -> fields and ``saes``)."""
    releases: dict[str, Any] = {}
    for release, value in data.items():
        if "saes" not in value:
            raise KeyError(f"Missing 'saes' key in {release}")
        entry = {name: value.get(name) for name in RELEASE_FIELDS}
        rows = []
        for sae in value["saes"]:
            row = [sae.get(column) for column in SAE_COLUMNS]
            if row[1] == row[0]:
                row[1] = None  # path == id, the common case
            rows.append(row)
        entry["saes"] = rows
        releases[release] = entry
    source = {
        "generated_by": "python3 -m interp.sae.loading.make_releases_table",
        "from": "SAELens's sae_lens/pretrained_saes.yaml (https://github.com/decoderesearch/SAELens)",
        "sae_lens_version": version,
        "git_tag": f"v{version}",
        "git_commit": commit,
        "yaml_sha256": sha256,
        "license": LICENSE,
        "sae_columns": SAE_COLUMNS,
    }
    return {"_source": source, "releases": releases}


def write_table(table: dict[str, Any], path: Path) -> None:
    """One release a line (diff-friendly), compact inside each line."""
    lines = ["{", f'"_source": {json.dumps(table["_source"], indent=1)},', '"releases": {']
    items = list(table["releases"].items())
    for index, (release, entry) in enumerate(items):
        comma = "," if index < len(items) - 1 else ""
        body = json.dumps(entry, separators=(",", ":"), ensure_ascii=False)
        lines.append(f"{json.dumps(release)}: {body}{comma}")
    lines += ["}", "}", ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def _installed_yaml() -> tuple[Path, str]:
    from importlib import metadata, resources

    try:
        version = metadata.version("sae-lens")
    except metadata.PackageNotFoundError:
        raise SystemExit(
            "sae-lens is not installed here: pass --yaml PATH --version X.Y.Z."
        ) from None
    return Path(str(resources.files("sae_lens") / "pretrained_saes.yaml")), version


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--yaml", type=Path, help="pretrained_saes.yaml (default: sae-lens's)")
    parser.add_argument("--version", help="the SAELens version the YAML comes from")
    parser.add_argument("--commit", help="the SAELens git commit, when known")
    parser.add_argument("--out", type=Path, default=TABLE)
    args = parser.parse_args(argv)
    if args.yaml is None:
        args.yaml, installed = _installed_yaml()
        args.version = args.version or installed
    if not args.version:
        raise SystemExit("--version is needed with --yaml (the SAELens version it came from).")
    raw = args.yaml.read_bytes()
    table = build_table(
        yaml.safe_load(raw), args.version, hashlib.sha256(raw).hexdigest(), args.commit
    )
    write_table(table, args.out)
    print(f"{args.out}: {len(table['releases'])} releases from sae-lens {args.version}")


if __name__ == "__main__":
    main()
