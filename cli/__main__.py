"""``python -m dfg.cli``: the dfg command."""

from dfg.cli.main import main

main()
