"""Clients: what talks to a running design. The probes (an HTTP request by hand, an echo), the
verification of a design's answer, the pipelining check, and the load tools' adapters
(clients/tools/). Imports the model and the system."""
