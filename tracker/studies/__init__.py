"""The packaged studies: one expectations file per paper the group reproduces
(``NAME.toml``; ``tracker studies`` lists them, docs/studies.md says how to add one)."""
