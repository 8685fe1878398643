"""Data by reference: allowed locations, sources (files and schemas) and loading of rows."""
