"""`python -m pgle ...`: the same as the `pgle` command."""

from pgle.cli.main import main

if __name__ == "__main__":
    main()
