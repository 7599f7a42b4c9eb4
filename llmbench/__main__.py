"""`python -m llmbench` = the `llmbench` console script."""
from llmbench.cli import main

main()
