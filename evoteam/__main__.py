"""`python -m evoteam ...` runs the `evoteam` command line."""

from evoteam import forget_working_folder

forget_working_folder()  # before anything else is imported from the working folder

from evoteam.cli import main  # noqa: E402

if __name__ == "__main__":
    main(prog_name="evoteam")
