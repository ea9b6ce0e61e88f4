"""Clients: what talks to a running design. The probes (an HTTP request by hand, an echo; probe.py
frames every answer the harness reads by its Content-Length), the raw-bytes client of the hostile
suite (raw_http.py), the verification of a design's answer, the pipelining check, and the load
tools' adapters (clients/tools/). Imports the model and the system."""
