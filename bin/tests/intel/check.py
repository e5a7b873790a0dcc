#!/usr/bin/env python3
"""What the threat-intel tools make of svc's exports, for bin/tests/export.rs: each mode reads one
document (or a TAXII server) with the reference tool and prints a JSON summary on stdout.

  check.py stix FILE            OASIS stix2-validator (STIX 2.1) and the stix2 library's parser
  check.py misp FILE            PyMISP's MISPEvent, for one event or a {"response": [...]} collection
  check.py layer FILE SCHEMA    jsonschema (draft 2020-12) against the Navigator layer schema
  check.py taxii URL USER PASS [ADDED_AFTER]
                                OASIS taxii2-client: discovery, API root, collection, every page of objects
"""
import json
import sys


def stix(path):
    import stix2
    from stix2validator import ValidationOptions, validate_file

    results = validate_file(path, ValidationOptions(version="2.1"))
    errors, warnings = [], []
    for result in results.object_results:
        errors += [f"{result.object_id}: {e}" for e in result.errors]
        warnings += [f"{result.object_id}: {w}" for w in result.warnings]
    with open(path, encoding="utf-8") as f:
        bundle = stix2.parse(f.read(), allow_custom=True)
    types = {}
    for obj in bundle.objects:
        types[obj["type"]] = types.get(obj["type"], 0) + 1
    return {"valid": results.is_valid, "errors": errors, "warnings": warnings, "types": types,
            "objects": len(bundle.objects)}


def misp(path):
    from pymisp import MISPEvent

    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    events = document["response"] if "response" in document else [document]
    summary = []
    for raw in events:
        event = MISPEvent()
        event.load(raw)
        summary.append({
            "uuid": event.uuid,
            "info": event.info,
            "attributes": [[a.type, a.category, a.value, a.to_ids] for a in event.attributes],
            "tags": [t.name for t in event.tags],
        })
    return {"events": summary}


def layer(path, schema_path):
    import jsonschema

    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    validator = jsonschema.Draft202012Validator(schema)
    return {"errors": [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(document)]}


def taxii(url, user, password, added_after=None):
    from taxii2client.v21 import Server, as_pages

    server = Server(url, user=user, password=password)
    root = server.api_roots[0]
    collection = root.collections[0]
    kwargs = {"added_after": added_after} if added_after else {}
    pages, ids = 0, []
    for envelope in as_pages(collection.get_objects, per_request=7, **kwargs):
        pages += 1
        ids += [o["id"] for o in envelope.get("objects", [])]
    return {"title": server.title, "api_root": root.title, "versions": root.versions,
            "collection": collection.id, "can_read": collection.can_read, "pages": pages, "ids": ids}


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    print(json.dumps({"stix": stix, "misp": misp, "layer": layer, "taxii": taxii}[mode](*args)))
