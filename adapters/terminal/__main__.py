from adapters.terminal.cli import main

main()
