from kernelcup.adapters.terminal.cli import main

main()
