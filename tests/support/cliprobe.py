"""The start of a probe script: run evoteam's CLI in a fresh interpreter, keep its exit code in
`code`; the test appends what it prints about the process (its imported modules, its models)."""

RUN_CLI = """
import json, sys
from evoteam.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
else:
    code = 0
"""
