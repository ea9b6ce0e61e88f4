"""Render: records in, the site's generated tables, pages and plots out; never measures. site.py
holds the registry of renderers, which is also the list of generated files. Imports only the model."""
