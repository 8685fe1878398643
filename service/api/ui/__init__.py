"""The pages for people: ``GET /`` and the ``/ui`` model browser (``pages``), the key form's
session cookie (``session``) and what the pages show of a record (``views``)."""
