"""One router per resource; each page has its JSON twin under /api/."""
