from hubkit.cli import main

main()
