"""`python -m eebench` runs the same command line as the `eebench` script."""

from eebench.cli import main

if __name__ == "__main__":
    main()
