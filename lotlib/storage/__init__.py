"""Files that survive crashes and are shared between processes: where caches live, atomic writes,
locks, checksums (no science here, and nothing here imports the rest of lotlib)."""
