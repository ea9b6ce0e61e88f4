"""Model: what the harness knows as data. Where the repository is, the catalogue of designs and
scenarios, every scenario setting and who reads it, the records and how they are written, the
statistics over repetitions, and the chains of optimisation steps. Imports nothing above it."""
