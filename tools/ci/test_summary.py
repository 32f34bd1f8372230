"""Totals the test cases of `bazel test` runs from their JUnit XML files (one or more testlogs dirs).

Prints each skipped case with its reason, then one line: "tests: N passed, N failed, N skipped".
Exits non-zero when a case failed or when no case ran at all.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(testlogs: list[str]) -> int:
    passed = failed = skipped = 0
    for xml in sorted(x for d in testlogs for x in Path(d).rglob("test.xml")):
        for case in ET.parse(xml).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                print(f"FAILED {case.get('classname')}::{case.get('name')}")
            elif (skip := case.find("skipped")) is not None:
                skipped += 1
                print(f"SKIPPED {case.get('classname')}::{case.get('name')}: {skip.get('message', '')}")
            else:
                passed += 1
    print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or passed + failed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["bazel-testlogs"]))
