"""The docs site is complete: every node of the project has a description, every column of every
built relation is described, and every doc() reference names a doc block.

Reads what `dbt docs generate` wrote (fixture `docs_site`). Run as a script against any target
directory to see the same report:
`python lakehistory/tests/docs/test_descriptions.py target [project_dir]` (default: the target's parent).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# The package's macros and docs and the demo project's nodes: everything on the site but dbt's own.
PACKAGES = ("lakehistory", "lakehistory_integration_tests")
# What the site documents: every node of the project, singular data tests included; a generic
# test is documented by its macro, test_<name>, which is checked with the other macros.
NODE_TYPES = ("model", "seed", "snapshot", "analysis")
# `default__x`, `spark__x`: an adapter's implementation of the dispatched macro `x`, documented there.
IMPLEMENTATION = re.compile(r"^[a-z]+__")
DOC_REF = re.compile(r"""\bdoc\(\s*['"]([^'"]+)['"]\s*\)""")
MACRO_SIGNATURE = re.compile(r"{%-?\s*(?:macro|test)\s+(\w+)\s*\((.*?)\)\s*-?%}", re.DOTALL)
PROPERTY_FOLDERS = ("models", "macros", "seeds", "snapshots", "analyses", "tests")


def load(target: Path) -> tuple[dict, dict]:
    return (
        json.loads((target / "manifest.json").read_text()),
        json.loads((target / "catalog.json").read_text()),
    )


def _described(item: dict | None) -> bool:
    return bool(item and (item.get("description") or "").strip())


def undescribed_nodes(manifest: dict) -> list[str]:
    """The project's models, seeds, snapshots, analyses, sources, macros and exposures without a
    description."""
    missing = []
    for node in manifest["nodes"].values():
        singular_test = node["resource_type"] == "test" and not node.get("test_metadata")
        if (
            node["package_name"] in PACKAGES
            and (node["resource_type"] in NODE_TYPES or singular_test)
            and not _described(node)
        ):
            missing.append(f"{node['resource_type']} {node['name']} ({node['original_file_path']})")
    for source in manifest["sources"].values():
        if source["package_name"] not in PACKAGES:
            continue
        if not (source.get("source_description") or "").strip():
            missing.append(f"source {source['source_name']} ({source['original_file_path']})")
        if not _described(source):
            missing.append(f"source table {source['source_name']}.{source['name']} ({source['original_file_path']})")
    for section, kind in (("macros", "macro"), ("exposures", "exposure")):
        for node in manifest[section].values():
            if node["package_name"] in PACKAGES and not IMPLEMENTATION.match(node["name"]) and not _described(node):
                missing.append(f"{kind} {node['name']} ({node['original_file_path']})")
    return sorted(set(missing))


def _signature(macro: dict) -> list[str]:
    """The argument names of a macro, from its definition."""
    match = MACRO_SIGNATURE.search(macro["macro_sql"])
    if not match or not match.group(2).strip():
        return []
    names, depth, current = [], 0, ""
    for char in match.group(2):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            names.append(current)
            current = ""
        else:
            current += char
    names.append(current)
    return [name.split("=")[0].strip() for name in names]


def undescribed_macro_arguments(manifest: dict) -> list[str]:
    """Public macros whose `arguments:` do not describe each argument of the definition, in order,
    and macros whose documented arguments are not the ones they take. A private helper (`_name`)
    needs only its one-line description. Generic tests (`{% test %}`, macro test_<name>) count as
    public macros."""
    missing = []
    for macro in manifest["macros"].values():
        if macro["package_name"] not in PACKAGES or IMPLEMENTATION.match(macro["name"]):
            continue
        expected = _signature(macro)
        documented = [argument["name"] for argument in macro.get("arguments") or []]
        where = f"macro {macro['name']} ({macro['original_file_path']})"
        if documented != expected and (documented or not macro["name"].startswith("_")):
            missing.append(f"{where}: arguments documented {documented}, defined {expected}")
        for argument in macro.get("arguments") or []:
            if not (argument.get("description") or "").strip():
                missing.append(f"{where}: argument {argument['name']} has no description")
    return sorted(missing)


def _catalog_entries(manifest: dict, catalog: dict):
    """(label, manifest node, catalog entry) for every built relation of the project."""
    for section in ("nodes", "sources"):
        for unique_id, entry in catalog.get(section, {}).items():
            node = manifest[section].get(unique_id)
            if node and node["package_name"] in PACKAGES:
                yield f"{node['resource_type']} {unique_id.split('.', 2)[2]}", node, entry


def undescribed_columns(manifest: dict, catalog: dict) -> list[str]:
    """Columns of the built relations (catalog.json) that the project's YAML does not describe."""
    missing = []
    for label, node, entry in _catalog_entries(manifest, catalog):
        described = {name.lower(): column for name, column in node.get("columns", {}).items()}
        for column in entry["columns"]:
            if not _described(described.get(column.lower())):
                missing.append(f"{label}: column {column} ({node['original_file_path']})")
    return sorted(missing)


def columns_not_built(manifest: dict, catalog: dict) -> list[str]:
    """Columns the YAML describes that the built relation does not have (a stale description)."""
    stale = []
    for label, node, entry in _catalog_entries(manifest, catalog):
        built = {column.lower() for column in entry["columns"]}
        for name in node.get("columns", {}):
            if name.lower() not in built:
                stale.append(f"{label}: column {name} is described but not in the built relation")
    return sorted(stale)


def unresolved_docs(manifest: dict, project_dir: Path) -> list[str]:
    """doc() references in the project's property files that name no doc block of the project (or
    an empty one), and descriptions left unrendered."""
    blocks = {
        doc["name"]: doc["block_contents"].strip()
        for doc in manifest["docs"].values()
        if doc["package_name"] in PACKAGES
    }
    problems = []
    if not blocks.get("__overview__"):
        problems.append("no {% docs __overview__ %} block: the site has no home page of its own")
    package_dir = (project_dir / "dbt_packages" / "lakehistory").resolve()
    for root in (project_dir, package_dir):
        for folder in PROPERTY_FOLDERS:
            for path in sorted((root / folder).rglob("*.yml")):
                for name in DOC_REF.findall(path.read_text()):
                    if not blocks.get(name):
                        problems.append(f"{path.relative_to(root)}: doc('{name}') names no doc block with content")
    for section in ("nodes", "sources", "macros", "exposures"):
        for node in manifest[section].values():
            if node["package_name"] not in PACKAGES:
                continue
            texts = [node.get("description") or ""]
            texts += [column.get("description") or "" for column in node.get("columns", {}).values()]
            if any("{{" in text and "doc(" in text for text in texts):
                problems.append(f"{node['unique_id']}: a description holds an unrendered doc() reference")
    return sorted(set(problems))


def _report(title: str, items: list[str]) -> str:
    return f"{len(items)} {title}:\n  " + "\n  ".join(items)


def test_every_node_has_a_description(docs_site: Path) -> None:
    manifest, _ = load(docs_site)
    missing = undescribed_nodes(manifest)
    assert not missing, _report("nodes without a description", missing)


def test_every_macro_argument_is_described(docs_site: Path) -> None:
    manifest, _ = load(docs_site)
    missing = undescribed_macro_arguments(manifest)
    assert not missing, _report("macros whose arguments are not described", missing)


def test_every_built_column_has_a_description(docs_site: Path) -> None:
    manifest, catalog = load(docs_site)
    assert catalog.get("nodes"), "catalog.json lists no relation: was the project built before `dbt docs generate`?"
    missing = undescribed_columns(manifest, catalog)
    assert not missing, _report("built columns without a description", missing)


def test_every_described_column_is_built(docs_site: Path) -> None:
    manifest, catalog = load(docs_site)
    stale = columns_not_built(manifest, catalog)
    assert not stale, _report("described columns that no built relation has", stale)


def test_doc_references_resolve(docs_site: Path) -> None:
    manifest, _ = load(docs_site)
    problems = unresolved_docs(manifest, docs_site.parent)
    assert not problems, _report("doc block problems", problems)


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "target")
    project_dir = Path(sys.argv[2]) if len(sys.argv) > 2 else target.resolve().parent
    manifest, catalog = load(target)
    checks = {
        "nodes without a description": undescribed_nodes(manifest),
        "macros whose arguments are not described": undescribed_macro_arguments(manifest),
        "built columns without a description": undescribed_columns(manifest, catalog),
        "described columns that no built relation has": columns_not_built(manifest, catalog),
        "doc block problems": unresolved_docs(manifest, project_dir),
    }
    for title, items in checks.items():
        print(_report(title, items) if items else f"0 {title}")
    sys.exit(1 if any(checks.values()) else 0)
