from tracker.cli import main

# guarded: the report's second process (spawned) imports the main module again
if __name__ == "__main__":
    main()
