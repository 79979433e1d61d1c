"""`python -m evoteam ...` runs the `evoteam` command line."""

from evoteam.cli import main

if __name__ == "__main__":
    main(prog_name="evoteam")
