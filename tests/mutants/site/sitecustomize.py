"""On PYTHONPATH in the mutation run only: its set-up is mutation_setup.py (also imported
first by the copy's boot sitecustomize, in command mode)."""

import mutation_setup  # noqa: F401
