"""Request and response bodies of the API, one module per resource."""
