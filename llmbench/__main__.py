from llmbench.entry import main

main()
