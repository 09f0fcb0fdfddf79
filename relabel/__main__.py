from relabel.cli import main

main()
