"""The book: notebook execution, the book build, sweeps, summaries and the reproduction report, which uses
everything and which nothing in lotlib uses (only the command line)."""
