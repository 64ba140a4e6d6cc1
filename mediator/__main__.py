from mediator.cli import main

main()
