"""The book: notebook execution, the book build, sweeps, summaries and the reproduction report. Uses
everything; nothing in lotlib uses it (only the command line).
"""
