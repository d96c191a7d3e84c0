from dflashctl.cli import main

main()
