"""The pages both outputs show: view models built from the store's read functions and the
figures (``job``, ``across_jobs``), rendered to HTML by pure functions (``pages``) from the
templates under ``templates/``. The offline report writes them to files; the live server
serves them. Neither output is imported here."""
