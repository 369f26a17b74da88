"""Reading downloaded job directories, and writing realistic sample ones."""
