"""System: processes and what the operating system tells about them. Process groups, ports, CPU
pinning, memory and CPU samples of a process group, our own open-files limit (open_files.py), the
machine's description, the one launcher of designs (launcher.py) and the delaying proxy. Imports
only the model."""
